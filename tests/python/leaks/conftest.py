"""One run per scenario and arguments for the whole session: several tests
read the same run (the `kept` leak and the argmax twin serve the leak, the
every-audit and the gate tests alike), so each program runs once."""
import pytest

from leakrun import scenario


@pytest.fixture(scope="session")
def audited_run(tmp_path_factory):
    done = {}

    def run(script, case, *args):
        key = (script, case, *args)
        if key not in done:
            done[key] = scenario(tmp_path_factory.mktemp(case), script, case, *args)
        return done[key]
    return run
