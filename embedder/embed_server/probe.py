"""Fixed texts the embedder runs at start: int8's calibration and auto's accuracy probe.

Two separate sets, so that the accuracy `auto` checks is never measured on the texts the int8
scales were fitted to. The probe holds what per-tensor int8 loses most on (one- and two-word
inputs, a query with its instruction), beside sentences, code and a longer paragraph. None of
it is anyone's note: it is written here, for this purpose.
"""

from __future__ import annotations

# SmoothQuant's per-channel input maxima (embed_server.int8): outlier channels show on any text,
# so a few varied ones are enough.
CALIBRATION_TEXTS = (
    "Meeting notes, Tuesday: agreed to move the release to the 14th; Sara owns the migration "
    "plan and will send the checklist by Friday.",
    "Sourdough: 500 g flour, 350 g water, 100 g starter, 10 g salt. Autolyse 1 h, fold four "
    "times, bulk 5 h at 24 C, shape, cold proof overnight, bake 45 min at 250 C in a covered pot.",
    "def merge(a, b):\n    out = []\n    while a and b:\n        out.append(a.pop(0) if a[0] <= "
    "b[0] else b.pop(0))\n    return out + a + b",
    "The boundary layer separates when the adverse pressure gradient is strong enough to reverse "
    "the flow near the wall.",
    "Der Zug nach München fährt um 8:15 von Gleis 4 ab; Umstieg in Augsburg.",
    "dentist",
    "password reset",
    "how do I bake bread",
)
# the last ones are also calibrated as queries, with the model's query instruction
CALIBRATION_QUERIES = 2

# Auto's accuracy check: every candidate's vectors of these against fp32's (lowest cosine).
PROBE_DOCUMENTS = (
    "bread",
    "wing flutter",
    "ok",
    "Shopping: eggs, milk, spinach, two lemons, coffee beans",
    "Notes from the call with the landlord: the heating will be repaired next week, rent stays "
    "the same until March.",
    "import numpy as np\nx = np.linspace(0, 1, 11)\nprint((x ** 2).sum())",
    "A paragraph about the printing press: movable type reached Europe around 1450, and within "
    "fifty years presses were running in more than two hundred cities, changing how knowledge "
    "spread and who could read it.",
)
PROBE_QUERIES = ("what did we decide about the release date", "heating")
