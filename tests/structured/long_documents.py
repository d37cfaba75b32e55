"""A long multi-section manual and a short note, for the long-text route's tests (summaries, sections, access)."""

from __future__ import annotations

SECTIONS: dict[str, list[str]] = {
    "Installation and siting": [
        "Choose a stretch of river bank that stays above the hundred-year flood line and is reachable by a small "
        "vehicle in every season.",
        "The mast is anchored in a concrete footing one metre deep, poured at least a week before the enclosure "
        "is mounted.",
        "Keep the solar panel facing south with a clear view of the sky between nine in the morning and three in "
        "the afternoon.",
        "Trees that will shade the panel within five years should be noted in the site log before the first visit "
        "ends.",
        "The depth probe is lowered through a slotted steel pipe bolted to a bridge pier or to a driven post.",
    ],
    "Power supply and batteries": [
        "The station runs from a forty-watt solar panel that charges two sealed lead-acid batteries through a "
        "charge controller.",
        "Batteries lose capacity with every deep discharge, so the controller disconnects the load below 11.8 volts.",
        "Replace both batteries together every four years, even when one of them still seems to hold its charge.",
        "A fully charged pair keeps the logger and the radio alive for nine days without any sunshine at all.",
        "Record the resting voltage of each battery at every visit so that a failing cell is noticed early.",
    ],
    "Sensor calibration": [
        "The pressure transducer drifts by a few millimetres a year and is checked against the staff gauge at every "
        "visit.",
        "Turbidity is calibrated with two formazin standards, and the optical window is wiped before each reading.",
        "Conductivity readings are corrected to twenty-five degrees Celsius by the logger's own temperature channel.",
        "A calibration is only accepted when two consecutive readings agree within the tolerance in the table.",
        "Keep the certificates of the reference instruments with the station log for the auditors.",
    ],
    "Data transmission": [
        "Readings are stored every fifteen minutes and sent once an hour over the cellular modem.",
        "When the network is down the logger keeps six weeks of readings and sends the backlog once it returns.",
        "Each message carries a checksum, and the receiving server rejects any message whose checksum fails.",
        "The modem's antenna must point towards the nearest mast; a directional antenna helps in deep valleys.",
        "Alerts for high water go out as text messages to the duty officer within two minutes of the reading.",
    ],
    "Winter operation": [
        "Ice forming around the probe pipe can lift it out of its clamps, so the clamps are checked after every "
        "hard frost.",
        "Snow on the panel stops charging completely; a steep tilt of sixty degrees lets it slide off by itself.",
        "Cold batteries deliver less current, and the enclosure is insulated with foam panels from November to March.",
        "Frozen rivers give false depth readings when the probe is trapped under a sheet of ice.",
        "Plan the winter visits for mild days and carry a spare heated probe housing.",
    ],
    "Vandalism and security": [
        "The enclosure is locked with a padlock that takes the standard key held by every field team.",
        "Stations close to footpaths get a plain grey enclosure without logos, which attracts less attention.",
        "A tilt switch in the enclosure sends an alert when the mast is pushed over or the door is forced.",
        "Report damage to the police and photograph it before anything is repaired.",
        "Cameras are not fitted, because footage of passers-by raises privacy questions.",
    ],
    "Routine maintenance visits": [
        "Visit every station at least once every eight weeks, and after every flood that reaches the mast.",
        "Clear vegetation from around the panel and the probe pipe and remove debris caught on the pipe.",
        "Download the logger's memory to the field laptop in case the telemetry missed a message.",
        "Check every cable gland for cracks, because water entering the enclosure corrodes the terminals.",
        "Fill in the visit form before leaving the site, with the time of arrival and of departure.",
    ],
    "Decommissioning": [
        "When a station is closed, the final readings are downloaded and archived with the full calibration history.",
        "Remove the mast, the probe pipe and the footing down to thirty centimetres below ground level.",
        "Batteries go to an approved recycler, never to general waste, and the receipt is kept in the log.",
        "Restore the river bank with local turf and tell the landowner that the work is complete.",
        "The station's identifier is retired and never reused for another site.",
    ],
    "Spare parts and suppliers": [
        "Keep one spare logger, one modem and one pressure transducer for every ten stations in service.",
        "Fuses, cable glands and padlocks are bought in bulk once a year from the framework supplier.",
        "Lead times for transducers can reach twelve weeks, so order them when the stock falls below three.",
        "Every part that leaves the store is booked against the station that receives it.",
        "Faulty parts are returned to the supplier with the fault report form attached.",
    ],
}

TITLE = "Kestrel river monitoring station: operating manual"


def manual_markdown() -> str:
    """The manual as Markdown: a title and one ``##`` section per theme."""
    parts = [f"# {TITLE}", ""]
    for heading, sentences in SECTIONS.items():
        parts += [f"## {heading}", "", " ".join(sentences[:3]), "", " ".join(sentences[3:]), ""]
    return "\n".join(parts)


SHORT_NOTE = (
    "# Visit note\n\nThe station at the old mill bridge was visited on a sunny day; the batteries read 12.9 volts "
    "and nothing needed repair.\n"
)

# Thematic questions and the section that answers each (none repeats the heading's words).
QUESTIONS: dict[str, str] = {
    "What keeps the station working through freezing months?": "Winter operation",
    "How is the equipment protected from people tampering with it?": "Vandalism and security",
    "What happens when a station is shut down for good?": "Decommissioning",
}
