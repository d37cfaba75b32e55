"""The small vocabularies the follow-up rule reads: referring words, question words, auxiliaries, prepositions, and
the nouns that name an aspect of a subject ("limitations") or stand in for it ("this approach")."""

from __future__ import annotations

import re

_WORD = re.compile(r"[^\W_][\w'’\-\.+#]*[\w+#]|[^\W_]", re.UNICODE)


def word_list(text: str) -> list[str]:
    """The words of ``text`` in order (hyphens, apostrophes, dots, + and # kept inside a word: "GPT-2", "C++",
    "node.js", "it's")."""
    return _WORD.findall(text)


def _words(text: str) -> frozenset[str]:
    return frozenset(text.split())


SINGULAR_PRONOUNS = _words("it its itself")
PLURAL_PRONOUNS = _words("they them their theirs themselves")
DEMONSTRATIVES = _words("this that these those")
REFERRING_WORDS = SINGULAR_PRONOUNS | PLURAL_PRONOUNS | DEMONSTRATIVES | _words("former latter it's it’s")

WH_WORDS = _words("what which who whom whose where when why how")
AUXILIARIES = _words(
    "is are was were be been being am do does did done has have had can could will would shall should may might must"
)
PREPOSITIONS = _words(
    "in for with on under during at by without within across from to over into onto using via versus vs vs. "
    "compared against between among through throughout inside outside beyond after before since per"
)
SUBORDINATORS = _words("if when while whenever unless although though because once")

# Nouns that name an aspect of a subject: "What are the limitations?" needs to know whose.
ASPECT_WORDS = _words(
    """limitation limitations advantage advantages disadvantage disadvantages benefit benefits drawback drawbacks
    downside downsides upside upsides weakness weaknesses strength strengths application applications use uses
    usage usages example examples history origin origins definition meaning purpose goal goals idea principle
    principles pros cons alternative alternatives performance accuracy complexity cost costs challenge challenges
    problem problems issue issues risk risks feature features property properties characteristic characteristics
    component components variant variants impact effect
    effects result results evaluation evaluations future trend trends implementation implementations author
    authors inventor inventors creator creators difference differences similarity similarities relationship role
    roles step steps requirement requirements assumption assumptions license licence pricing price speed
    runtime latency scalability reliability criticism criticisms critique critiques
    mechanism mechanisms intuition benchmark benchmarks metric metrics adoption popularity""".replace("\n", " ")
)

# Nouns that, after "this"/"that"/"these"/"those", stand in for the subject itself ("Who proposed this method?").
STAND_IN_NOUNS = _words(
    """approach approaches method methods technique techniques model models algorithm algorithms idea ideas concept
    concepts framework frameworks tool tools library libraries system systems theory theories topic topics field
    fields architecture architectures strategy strategies process processes procedure procedures methodology
    methodologies practice practices pattern patterns paradigm paradigms""".replace("\n", " ")
)

# Verbs after which a bare "this"/"that" is the subject ("How does this work?"), not a statement ("Is that true?").
SUBJECT_VERBS = _words(
    """work works compare compares differ differs scale scales perform performs apply applies relate relates help
    helps fail fails handle handles support supports require requires cost costs improve improves affect affects
    run runs used use uses achieve achieves learn learns compute computes deal deals cope copes behave behaves
    generalize generalizes generalise generalises converge converges matter matters evolve evolves
    exist exists""".replace("\n", " ")
)

# Verbs after which a final "this"/"that" is the subject ("Who invented this?"), not a statement ("Who said that?").
OBJECT_VERBS = _words(
    """use uses used invented invent proposed propose introduced introduce developed develop created create maintains
    maintain implements implement implemented supports support adopted adopt pioneered designed design built build
    funds funded""".replace("\n", " ")
)

# Words that do not make a subject on their own ("What is happening?", "the best way").
VAGUE_WORDS = _words(
    """thing things way ways something anything everything nothing one ones stuff new best better good bad main
    other others same different difference differences happening going point case cases part parts lot lots
    question questions answer answers here there now then today this that it the a an""".replace("\n", " ")
)

# Words a bare follow-up is made of besides its aspect ("What are the main limitations?", "Any examples?").
FILLER_WORDS = _words(
    "a an the any some main key major other more most common typical known biggest important top few several "
    "please me us list name give show tell there here about its their it this that"
)
