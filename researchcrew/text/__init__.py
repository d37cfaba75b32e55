"""Text analysis shared by every stage: sentences, words, stems and stop words."""
