"""Property-based: schemathesis sends requests generated from /v1/openapi.json to a real
`outbox web` on loopback and checks every answer against the document (status codes,
content types, headers, bodies), that no request is a server error, and that a request
without the key is refused."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
import schemathesis
from hypothesis import HealthCheck, given
from hypothesis import settings as hypothesis_settings
from hypothesis import strategies as st
from schemathesis.specs.openapi.checks import positive_data_acceptance

from outbox.config import Settings
from tests.integration.helpers import LOGIN, query
from tests.integration.test_http_api import Api, running


@pytest.fixture
def api(settings: Settings) -> Iterator[Api]:
    yield from running(settings, api_rate=100_000.0, api_burst=100_000)


# Data that fits the schema may still be refused: an unknown template, a
# recipient that is no address. The document says so (422), so a refusal of
# valid-looking data is not a failure here; everything else is checked.
EXCLUDED = [positive_data_acceptance]


@pytest.mark.parametrize("operation", ["POST /v1/emails", "POST /v1/emails/batch",
                                       "GET /v1/emails", "GET /v1/emails/{id}",
                                       "DELETE /v1/emails/{id}"])  # fmt: skip
def test_every_answer_matches_the_document(api: Api, operation: str) -> None:
    schema = schemathesis.openapi.from_url(api.url + "/v1/openapi.json")
    method, path = operation.split(" ")
    strategy = schema[path][method].as_strategy()
    headers = {"Authorization": f"Bearer {api.key('send', 'read')}"}
    statuses: set[int] = set()

    @given(case=strategy)
    @hypothesis_settings(
        max_examples=60,
        deadline=None,
        suppress_health_check=list(HealthCheck),
        database=None,
    )
    def check(case: schemathesis.Case) -> None:
        response = case.call_and_validate(
            base_url=api.url, headers=headers, excluded_checks=EXCLUDED
        )
        statuses.add(response.status_code)

    check()
    assert statuses, "no request was made"
    assert all(code < 500 for code in statuses)
    # Whatever was refused, the table holds only what was accepted (2xx).
    rows = query(api.settings, "SELECT count(*) FROM email_outbox")[0][0]
    if not statuses & {200, 202}:
        assert rows == 0


# Requests close to valid, so that most are accepted: a few keys and recipients
# reused, params sometimes missing a variable, a recipient sometimes broken.
EMAILS = st.fixed_dictionaries(
    {
        "key": st.sampled_from(["a", "b", "c", "d"]),
        "to": st.sampled_from(["alice@example.com", "bob@example.org", "broken@", "x@y.z"]),
        "params": st.sampled_from([LOGIN, {**LOGIN, "code": "999999"}, {"name": "A"}]),
        "priority": st.sampled_from([None, "high", "bulk"]),
    }
)


def test_accepted_once_per_key_and_refused_requests_write_nothing(api: Api) -> None:
    token = api.key()

    @given(requests=st.lists(EMAILS, min_size=1, max_size=12))
    @hypothesis_settings(
        max_examples=40, deadline=None, suppress_health_check=list(HealthCheck), database=None
    )
    def check(requests: list[dict[str, object]]) -> None:
        prefix = f"p{next(run)}-"  # each example in keys of its own
        accepted: dict[str, tuple[object, object]] = {}  # key: (content, first body)
        for request in requests:
            key = prefix + str(request["key"])
            body = {"template": "login_code", **{k: v for k, v in request.items() if k != "key"}}
            answer = api.post("/v1/emails", token, body, key=key)
            # No priority: the template's own (login_code: high) is the same content.
            content = (body["to"], str(body["params"]), body["priority"] or "high")
            if answer.status_code == 422:
                assert answer.json()["errors"], answer.text
                assert body["to"] == "broken@" or body["params"] == {"name": "A"}
            elif key not in accepted:
                assert answer.status_code == 202, answer.text
                accepted[key] = (content, answer.json())
            elif accepted[key][0] == content:
                assert answer.status_code == 200, answer.text
                assert answer.json() == accepted[key][1]
            else:
                assert answer.status_code == 409, answer.text
        stored = query(
            api.settings,
            "SELECT idempotency_key, recipient FROM email_outbox WHERE idempotency_key LIKE %s",
            prefix + "%",
        )
        assert sorted(k for k, _ in stored) == sorted(accepted)
        for k, recipient in stored:
            assert accepted[k][0][0] == recipient

    run = iter(range(10**6))
    check()
