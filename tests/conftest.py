"""Session-wide test configuration.

Fixtures that build tiny random models live in ``tests/fixtures_models.py`` (imported here) so that the real
loading code runs on a saved folder; slow tests (marked ``slow``) use SmolLM2-135M-Instruct from the package
registry through the zoo cache.
"""

from fixtures_models import *  # noqa
