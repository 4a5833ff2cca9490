"""docs/deployment.md shows what the multi-machine test runs: its hosts, environment and start
order are `deploy/hosts.toml`'s, which tests/cluster/ brings up, and every variable it sets is
read by something the platform runs."""

from crawl_platform.config import Settings
from tests.cluster import guide
from tests.cluster.cluster import Cluster
from tests.cluster.deployment import HOSTS_TOML, REPO, load_deployment

LIBPQ = {"PGPASSWORD"}  # read by libpq: the catalog's connections and psql


def test_the_guide_shows_hosts_toml_as_it_is():
    assert guide.current() == guide.render(), "run `python -m tests.cluster.guide` to write it anew"


def test_every_host_and_step_of_hosts_toml_is_in_the_guide():
    text = guide.GUIDE.read_text()
    deployment = load_deployment()
    for host in deployment.hosts:
        assert f"**{host.name}** ({host.address}):" in text
        for step in host.steps:
            assert f"# {step.name}\n" in text


def test_every_variable_of_the_guide_is_read_by_the_platform():
    settings = {Settings.env_var(name) for name in Settings.model_fields}
    instance_yaml = (REPO / "deploy" / "dagster.yaml").read_text()
    for name in load_deployment().env:
        if name.startswith("DAGSTER_PG_"):
            assert f"env: {name}" in instance_yaml, name
        else:
            assert name in settings | {"DAGSTER_HOME"} | LIBPQ, f"{name} in {HOSTS_TOML.name} is read by nothing"


def test_the_test_hosts_get_the_guides_environment_and_only_their_own_folder(tmp_path):
    """The harness adds PATH, LANG and HOME to a host's environment, nothing else, and the
    environment of one host names no folder of another."""
    deployment = load_deployment()

    class FakeHost:
        def __init__(self, name: str) -> None:
            self.name = name
            self.home = tmp_path / name

    class FakeNetwork:
        hosts = {h.name: FakeHost(h.name) for h in deployment.hosts}

    cluster = Cluster(deployment, FakeNetwork())  # type: ignore[arg-type]
    for host in FakeNetwork.hosts.values():
        env = cluster.env(host)  # type: ignore[arg-type]
        assert set(env) - set(deployment.env) == {"PATH", "LANG", "HOME"}
    cluster.assert_private()
