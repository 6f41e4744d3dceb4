"""A generic text corpus for fitting the Jacobian lens in an assessment (the J-Access paper, eq. 1: J over "generic text
inputs"). Non-adjudicating, like every latent measurement (C-H6).

Twelve short paragraphs on everyday topics that name no pack entity, town or employer, so the lens learns how the
model's middle layers map to its output on text that is not about the target. ``tests/e2e/jaccess_measure.py``
measured J-Access on SmolLM2 with lenses fitted on these same paragraphs (docs/latent.md): 6 of them gave a stable
reading there, 2 did not.
"""

from __future__ import annotations

LENS_TEXT: tuple[str, ...] = (
    "The river flows through a wide valley before it reaches the sea. Farmers along its banks grow wheat, barley "
    "and vegetables, and in spring the water often rises above the fields. Engineers built a series of dams in the "
    "last century to control the floods and to produce electricity for the nearby cities.",
    "Photosynthesis is the process by which green plants use sunlight to turn water and carbon dioxide into sugar "
    "and oxygen. It takes place mainly in the leaves, inside small structures called chloroplasts, which contain "
    "the pigment that gives plants their colour and absorbs most of the light.",
    "The first printed books were expensive and rare, but as presses spread across the continent the price of "
    "paper fell and more people learned to read. Libraries grew, newspapers appeared in the larger towns, and "
    "within two centuries reading had become a common habit rather than a privilege.",
    "A good bread dough needs only flour, water, salt and yeast. After mixing, the dough is kneaded until it "
    "becomes smooth and elastic, then left to rise in a warm place. Baking at a high temperature creates a crisp "
    "crust, while the inside stays soft and light.",
    "In mathematics, a prime number is a whole number greater than one that has no divisors other than one and "
    "itself. The ancient Greeks already knew that there are infinitely many primes, and the question of how they "
    "are distributed among the integers is still studied today.",
    "The orchestra tuned its instruments while the audience found their seats. When the conductor raised his "
    "hands, the hall fell silent, and the violins began the slow opening theme. Over the next hour the music moved "
    "from quiet passages to loud and dramatic climaxes.",
    "Glaciers form where more snow falls in winter than melts in summer. Over many years the snow is pressed into "
    "ice, which slowly flows downhill under its own weight, carving deep valleys and carrying rocks far from the "
    "mountains where they broke away.",
    "The market opens early in the morning, when traders arrive with fresh fish, fruit and cheese. By noon the "
    "square is crowded with shoppers, and the smell of roasted coffee drifts from the small cafes along the edge "
    "of the street.",
    "Bees collect nectar from flowers and carry it back to the hive, where it is stored in wax cells and slowly "
    "turned into honey. A single colony can hold tens of thousands of workers, all descended from one queen.",
    "Before the railway arrived, a journey between the two cities took several days by coach. The new line cut "
    "the trip to a few hours, and within a decade goods, letters and travellers moved faster than ever before.",
    "A healthy diet includes plenty of vegetables, whole grains and water. Regular exercise strengthens the heart "
    "and muscles, and a good night of sleep helps the body recover and the mind stay alert during the day.",
    "Volcanoes release molten rock, ash and gas from deep below the surface. Some erupt violently after long "
    "quiet periods, while others let lava flow gently down their slopes for months at a time.",
)


__all__ = ["LENS_TEXT"]
