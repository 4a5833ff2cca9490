"""The ``records`` asset and its checks, partitioned by crawl, on a crawl of the Python docs: the
sensor adds the crawl's partition and requests its run, a materialisation lands the records from
the archive and both checks pass; after a rule change with a wrong selector, re-materialising the
partition fetches nothing and the null-rate check fails with the field's rate in its metadata. The
Launchpad job takes rules as text and refuses bad ones with nothing enqueued."""

from dagster import SensorResult, SkipReason, build_sensor_context, materialize

from crawl_platform.bus.messages import decode_crawl_request
from crawl_platform.bus.offsets import OffsetRange
from crawl_platform.extract.records import set_rules
from crawl_platform.extract.rules import parse_rules
from crawl_platform_dagster.assets.intake import submit_crawl_job
from crawl_platform_dagster.assets.records import EXTRACT_PARTITIONS, records, records_checks
from crawl_platform_dagster.sensors.records import records_sensor
from tests.dagster.conftest import RESOURCES
from tests.sites.docs import DOCS_PAGES, crawl_docs

RULES = """
fields:
  title: {selector: "css:div.body h1", strip: "¶", required: true}
  headings: {selector: "css:div.body h2", type: list, strip: "¶"}
  patch: {selector: "css:title", regex: 'Python 3\\.11\\.(\\d+)', type: int, required: true}
checks: {max_null_rate: 0.25}
"""


def _materialize(instance):
    result = materialize([records, *records_checks], partition_key="docs", instance=instance, resources=RESOURCES)
    assert result.success
    (materialization,) = result.asset_materializations_for_node("records")
    checks = {e.check_name: e for e in result.get_asset_check_evaluations()}
    return materialization.metadata, checks


def test_the_sensor_adds_the_crawl_and_a_materialisation_extracts_and_checks_it(crawl_env, bus, store, python_docs,
                                                                               instance):
    crawl_docs(crawl_env, bus, store, python_docs, "docs", parse_rules(RULES), pages=DOCS_PAGES)

    tick = records_sensor(build_sensor_context(instance=instance, resources=RESOURCES))

    assert isinstance(tick, SensorResult)
    assert [r.partition_key for r in tick.run_requests] == ["docs"]
    assert tick.run_requests[0].tags["crawl/pending_pages"] == "4"
    assert [(r.partitions_def_name, r.partition_keys) for r in tick.dynamic_partitions_requests] == [
        (EXTRACT_PARTITIONS, ["docs"])]
    instance.add_dynamic_partitions(EXTRACT_PARTITIONS, ["docs"])
    metadata, checks = _materialize(instance)

    assert (metadata["pages_extracted"].value, metadata["records"].value, metadata["page_errors"].value) == (4, 4, 0)
    assert metadata["view"].value == "records_docs"
    assert {name: c.passed for name, c in checks.items()} == {"records_null_rate": True, "records_type_errors": True}
    assert checks["records_null_rate"].metadata["null_rate[title]"].value == 0.0
    assert checks["records_type_errors"].metadata["type_errors[patch]"].value == 0.0
    again = records_sensor(build_sensor_context(instance=instance, resources=RESOURCES))
    assert isinstance(again, SkipReason)
    assert str(again.skip_message) == "every crawl's records are up to date with its rules"


def test_a_wrong_selector_re_extracted_from_the_archive_fails_the_null_rate_check(crawl_env, bus, store, python_docs,
                                                                                  instance):
    crawl_docs(crawl_env, bus, store, python_docs, "docs", parse_rules(RULES), pages=DOCS_PAGES)
    instance.add_dynamic_partitions(EXTRACT_PARTITIONS, ["docs"])
    _materialize(instance)
    python_docs.clear_requests()

    set_rules(store, "docs", parse_rules(RULES.replace("div.body h1", "div.body h1.nope")))
    metadata, checks = _materialize(instance)

    assert python_docs.requests == []  # re-extracted from the archive: nothing refetched
    assert (metadata["pages_extracted"].value, metadata["pages_replaced"].value) == (4, 4)
    assert metadata["field_errors"].value == {"title: missing": 4}
    failed = checks["records_null_rate"]
    assert not failed.passed
    assert failed.metadata["null_rate[title]"].value == 1.0
    assert failed.metadata["null_rate[patch]"].value == 0.0
    assert failed.metadata["threshold"].value == 0.25
    assert failed.description == "null_rate: title 100.0% of 4 records > 25.0%"
    assert checks["records_type_errors"].passed


def _launchpad(extract_rules: str):
    config = {"ops": {"submit_crawl_request": {"config": {
        "seeds": ["http://127.0.0.1:9/start"], "crawl_id": "launchpad-rules", "extract_rules": extract_rules}}}}
    return submit_crawl_job.execute_in_process(run_config=config, resources=RESOURCES, raise_on_error=False)


def test_the_launchpad_takes_extraction_rules_as_text_and_refuses_bad_ones(crawl_env, bus):
    bad = _launchpad("fields: {title: {selector: 'css:h1', regex: '('}}")

    assert not bad.success
    failure = bad.get_step_failure_events()[0].step_failure_data.error
    assert failure.message.startswith("dagster._core.definitions.events.Failure: bad crawl request: extract_rules: "
                                      "fields.title.regex: pattern '(' is not a valid RE2 regular expression:")
    assert all(hi == 0 for _lo, hi in bus.watermarks(crawl_env.seeds_topic).values())

    assert _launchpad(RULES).success
    ((part, (low, high)),) = [(p, w) for p, w in bus.watermarks(crawl_env.seeds_topic).items() if w[1]]
    (record,) = bus.read_range(crawl_env.seeds_topic, OffsetRange(part, low, high))
    assert parse_rules(decode_crawl_request(record.value).extract_rules) == parse_rules(RULES)
