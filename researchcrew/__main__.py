from researchcrew.cli import main

main()
