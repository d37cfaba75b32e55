"""Long multi-section documents and thematic questions for ``benchmarks/long_text.py`` (hand-written; the answers'
sections are known because each question was written for one section, in words the heading does not use)."""

from __future__ import annotations

from tests.structured.long_documents import SECTIONS as STATION_SECTIONS
from tests.structured.long_documents import TITLE as STATION_TITLE

SEED_LIBRARY = {
    "Collecting seeds": [
        "Seeds are gathered only from healthy plants that grew true to their variety and were not crossed with "
        "neighbouring plots.",
        "Pods of beans and peas are left on the vine until they rattle, then picked on a dry afternoon.",
        "Tomato seeds are scooped out with their gel and left to ferment in a jar for three days before rinsing.",
        "Every batch gets a paper tag with the variety, the grower's name and the date it was picked.",
    ],
    "Drying and storage": [
        "Spread the cleaned seeds on screens in a shaded, airy room until they snap instead of bending.",
        "Dry seeds keep for years in airtight glass jars kept in a cool cupboard away from the kitchen.",
        "A sachet of silica gel in each jar soaks up moisture and changes colour when it needs replacing.",
        "Jars are never stored in the shed, where summer heat and winter damp ruin viability within a season.",
    ],
    "Germination testing": [
        "Each spring ten seeds from every jar are rolled in a damp paper towel and kept warm for a week.",
        "The number that sprout gives the batch's rate, which is written on the jar's label.",
        "Batches that sprout below half are grown out again rather than lent, so members are not disappointed.",
        "Slow starters such as parsley and peppers get two weeks before the count is made.",
    ],
    "Lending rules": [
        "Members may borrow up to five packets a season and are asked to return seeds from their own harvest.",
        "A returned packet must hold at least as many seeds as the member took, saved from isolated plants.",
        "Nobody is turned away for failing to return seeds; the loss is simply recorded as a gift.",
        "Rare heirlooms are lent only to members who have returned a healthy batch before.",
    ],
    "Volunteer roles": [
        "The coordinator keeps the calendar of swaps and answers questions from new members.",
        "Packers fill envelopes at the monthly work evening, using the counting spoons kept in the cupboard.",
        "Two volunteers run the stall at the farmers' market and bring the sign-up sheet back afterwards.",
        "Anyone may help, and a short induction covers labels, hygiene and how to use the catalogue.",
    ],
    "Record keeping": [
        "The catalogue lists every variety with its origin story, its growers and its germination history.",
        "Loans and returns are entered in the spreadsheet on the evening they happen, not from memory later.",
        "Photographs of each variety's fruit and flower help growers check that a batch stayed true.",
        "A printed copy of the catalogue is kept in the box, in case the laptop is not available.",
    ],
    "Seed swaps and events": [
        "Twice a year the library holds a swap in the village hall where growers trade their surplus.",
        "Tables are arranged by plant family so that visitors can find beans, brassicas and squashes quickly.",
        "Children's tables offer sunflowers and nasturtiums that are easy to grow in a pot.",
        "Tea and cake are sold to pay for envelopes, labels and the hall's rent.",
    ],
    "Keeping varieties pure": [
        "Squashes cross readily, so only one variety of each species is grown for seed in a garden each year.",
        "Flowers may be bagged and pollinated by hand when two varieties must grow side by side.",
        "Lettuce and tomatoes rarely cross, so a few metres between varieties is usually enough.",
        "Plants that look different from their description are pulled out before they flower.",
    ],
}

BAKERY = {
    "Allergen control": [
        "Nuts, sesame and gluten-free flours are kept in sealed tubs on a separate, labelled shelf.",
        "Gluten-free bread is baked first in the morning, before any wheat flour is in the air.",
        "Every product card lists the fourteen regulated allergens it contains, checked against the recipe.",
        "Staff tell customers honestly when a trace cannot be ruled out, rather than guessing.",
    ],
    "Cleaning schedule": [
        "Work surfaces are washed and sanitised after every batch and at the end of each shift.",
        "Mixers are stripped down on Fridays and their bowls run through the dishwasher at a high temperature.",
        "The floor is swept during the day and mopped with detergent after closing.",
        "Each task on the rota is initialled by the person who did it, and the manager checks the sheet weekly.",
    ],
    "Temperature checks": [
        "Fridges must hold five degrees or below, and their readings are written down at opening and closing.",
        "Cream fillings are cooled quickly in shallow trays and used within two days.",
        "A probe thermometer confirms that meat pies reach seventy-five degrees in the centre.",
        "When a fridge reads too warm, its contents are assessed and the engineer is called the same day.",
    ],
    "Pest control": [
        "Flour sacks are stored on pallets off the floor and away from the walls so that droppings are seen.",
        "Gaps around pipes are sealed with wire wool and filler, and doors close on their own.",
        "A contractor inspects the bait stations monthly and leaves a written report.",
        "Any sign of mice or weevils is reported to the manager before baking continues.",
    ],
    "Staff training": [
        "New bakers shadow an experienced colleague for two weeks before working a shift alone.",
        "Everyone completes the level two food hygiene course within their first month.",
        "Refresher sessions each spring cover allergens, cleaning and what changed in the law.",
        "Training records are kept in the office and shown to inspectors on request.",
    ],
    "Supplier approval": [
        "Ingredients are bought only from suppliers who send a current hygiene certificate.",
        "Deliveries are checked for damage, temperature and use-by dates before they are signed for.",
        "A supplier that sends spoiled goods twice in a year is replaced.",
        "Specifications for each flour and fat are kept on file so that substitutes are not accepted blindly.",
    ],
    "Personal hygiene": [
        "Hands are washed at the dedicated basin on entering the bakery and after every break.",
        "Rings and watches are removed, and long hair is tied back under a hat.",
        "Anyone with vomiting or diarrhoea stays at home until forty-eight hours after the symptoms stop.",
        "Cuts are covered with blue plasters that are easy to spot if one falls into dough.",
    ],
    "Labelling and display": [
        "Loaves are labelled with the day they were baked and sold within two days.",
        "Pre-packed sandwiches carry a full ingredient list with allergens in bold.",
        "Cakes on the counter are kept under covers and away from the till.",
        "Yesterday's bread is sold at half price on a separate shelf marked clearly.",
    ],
}

LAB_DATA = {
    "Backups": [
        "Raw instrument files are copied each night to the department's storage and weekly to an offsite tape.",
        "A restore is rehearsed every term, picking one project at random, to prove the copies can be read.",
        "Laptops are not a safe place for the only copy of anything, however temporary it seems.",
        "The backup log is checked on Monday mornings and failures are raised with the IT desk.",
    ],
    "Access control": [
        "Project folders are open only to the people named on the project, granted by the principal investigator.",
        "Accounts of people who leave the group are closed on their last day.",
        "Passwords are never shared; a colleague who needs access asks for their own.",
        "Two-factor sign-in is required for the remote desktop and for the storage portal.",
    ],
    "File naming": [
        "File names start with the date in year-month-day order so that they sort chronologically.",
        "Names use the sample identifier and a short description, with underscores instead of spaces.",
        "Version numbers go at the end, and the word final is never used.",
        "A readme file in each folder explains the naming scheme and the abbreviations used.",
    ],
    "Retention and deletion": [
        "Data supporting a publication is kept for ten years after the paper appears.",
        "Intermediate files that can be regenerated from raw data and scripts may be deleted after a project ends.",
        "Before anything is deleted the principal investigator signs the disposal form.",
        "Deleted project folders are purged from the backups at the next yearly rotation.",
    ],
    "Sharing with collaborators": [
        "Data goes to partners through the university's transfer service, not by email attachment.",
        "A data sharing agreement is signed before any files leave the group.",
        "Shared copies are documented in the project log with the recipient and the date.",
        "Public datasets are deposited in a repository with a persistent identifier and a licence.",
    ],
    "Personal data": [
        "Participant names and contact details are kept apart from measurements, linked only by a code.",
        "The key linking codes to names is stored encrypted and only two people can open it.",
        "Consent forms say how long data is kept and who may see it, and the group keeps to that.",
        "A breach is reported to the data protection officer within a day of being noticed.",
    ],
    "Lab notebooks": [
        "Every experiment is written up on the day, in the electronic notebook, with links to its raw files.",
        "Entries are signed off by a colleague once a month as a witness.",
        "Mistakes are struck through and explained, never erased.",
        "The notebook stays with the group when its author moves on.",
    ],
    "Software and scripts": [
        "Analysis scripts are kept under version control in the group's repository.",
        "Each script states which package versions it was run with.",
        "Figures in papers are produced by scripts, not edited by hand.",
        "Code review by a second person is expected before results are submitted.",
    ],
}

DOCUMENTS: dict[str, tuple[str, dict[str, list[str]]]] = {
    "station-manual.md": (STATION_TITLE, STATION_SECTIONS),
    "seed-library-handbook.md": ("Riverside community seed library: volunteer handbook", SEED_LIBRARY),
    "bakery-food-safety.md": ("Corner bakery food safety plan", BAKERY),
    "lab-data-policy.md": ("Microbiology group research data policy", LAB_DATA),
}

# (question, file, section): written for one section each, in words its heading does not use.
QUESTIONS: list[tuple[str, str, str]] = [
    ("What keeps the station working through freezing months?", "station-manual.md", "Winter operation"),
    ("How is the equipment protected from people tampering with it?", "station-manual.md", "Vandalism and security"),
    ("What happens when a station is shut down for good?", "station-manual.md", "Decommissioning"),
    ("How long do the station's energy cells last before swapping?", "station-manual.md", "Power supply and batteries"),
    ("How are readings sent back to the office?", "station-manual.md", "Data transmission"),
    ("How do members find out whether old seeds will still sprout?", "seed-library-handbook.md", "Germination testing"),
    ("Where should jars of seed be kept so they last?", "seed-library-handbook.md", "Drying and storage"),
    ("How many packets can a member take, and what do they give back?", "seed-library-handbook.md", "Lending rules"),
    (
        "How do growers stop different squash varieties from mixing?",
        "seed-library-handbook.md",
        "Keeping varieties pure",
    ),
    ("How does the bakery stop nut traces getting into other products?", "bakery-food-safety.md", "Allergen control"),
    ("What does the bakery do about rodents and insects?", "bakery-food-safety.md", "Pest control"),
    ("How cold must chilled items be kept, and how is it checked?", "bakery-food-safety.md", "Temperature checks"),
    ("What must bakers do before touching dough after a break?", "bakery-food-safety.md", "Personal hygiene"),
    ("How long must results behind a published paper be kept?", "lab-data-policy.md", "Retention and deletion"),
    ("Who is allowed to open a project's folders?", "lab-data-policy.md", "Access control"),
    ("How are study participants' identities kept private?", "lab-data-policy.md", "Personal data"),
    ("How can the group be sure its copies of raw files can be recovered?", "lab-data-policy.md", "Backups"),
]


def markdown(title: str, sections: dict[str, list[str]]) -> str:
    """A document as Markdown: its title and one ``##`` section per theme, two paragraphs each."""
    parts = [f"# {title}", ""]
    for heading, sentences in sections.items():
        half = (len(sentences) + 1) // 2
        parts += [f"## {heading}", "", " ".join(sentences[:half]), "", " ".join(sentences[half:]), ""]
    return "\n".join(parts)
