"""OUTBOX_SECRET strength and rotation (finding 5: weak secrets accepted)."""

from __future__ import annotations

import secrets

import pytest

from outbox import keys
from outbox.config import Settings
from outbox.errors import ConfigError
from outbox.message import list_unsubscribe as unsubscribe
from outbox.message.return_path import outbox_id_from_token, token
from outbox.token_signatures import sign, verify
from tests.keys import OTHER_SECRET, SECRET

# A strong value, fixed so that the cases' names are the same in every run.
STRONG = "q7Vd3kLmZp0XrT9sWc2yBn5HjF8gAe6uRt1oKi4xNvM"
WEAK = [
    "k3",  # recovered from one token in 426 guesses
    "a",
    " ",
    "",
    "a" * 64,
    "ab" * 32,
    "abcd1234" * 5,
    "abcdefghijklmnopqrstuvwxyz0123456789",
    "0123456789" * 4,
    "password" * 4,
    " " + STRONG,  # quoting mistake in an env file
    STRONG + "\n",
    "x" * 31,
]


@pytest.mark.parametrize("value", WEAK)
def test_regression_weak_secret_is_refused_at_start(value: str) -> None:
    with pytest.raises(ConfigError, match="OUTBOX_SECRET") as refused:
        Settings.from_env({"OUTBOX_SECRET": value or " "})
    if len(value.strip()) > 3:
        assert value.strip() not in str(refused.value)  # the error never shows the value


@pytest.mark.parametrize("value", WEAK)
def test_weak_values_have_a_reason(value: str) -> None:
    assert keys.weakness(value) is not None


@pytest.mark.parametrize(
    "make",
    [
        lambda: secrets.token_hex(16),
        lambda: secrets.token_hex(32),
        lambda: secrets.token_urlsafe(32),
        lambda: secrets.token_urlsafe(64),
    ],
)
def test_generated_secrets_are_accepted(make: object) -> None:
    for _ in range(2000):
        value = make()  # type: ignore[operator]
        assert keys.weakness(value) is None, value


def test_no_secret_is_still_a_working_default() -> None:
    assert Settings.from_env({}).secret == ""


def test_previous_secrets_are_checked_and_need_a_current_one() -> None:
    with pytest.raises(ConfigError, match="OUTBOX_PREVIOUS_SECRETS"):
        Settings.from_env({"OUTBOX_SECRET": SECRET, "OUTBOX_PREVIOUS_SECRETS": "old"})
    with pytest.raises(ConfigError, match="needs OUTBOX_SECRET"):
        Settings.from_env({"OUTBOX_PREVIOUS_SECRETS": OTHER_SECRET})
    settings = Settings.from_env(
        {"OUTBOX_SECRET": SECRET, "OUTBOX_PREVIOUS_SECRETS": f" {OTHER_SECRET} ,, "}
    )
    assert settings.previous_secret_list == (OTHER_SECRET,)


def test_rotation_verifies_old_tokens_and_signs_with_the_new_secret() -> None:
    old = token(42, secret=OTHER_SECRET)
    assert outbox_id_from_token(old, secret=SECRET) is None
    assert outbox_id_from_token(old, secret=SECRET, previous=(OTHER_SECRET,)) == 42
    link = unsubscribe.token(42, secret=OTHER_SECRET)
    assert unsubscribe.outbox_id_from_token(link, secret=SECRET, previous=(OTHER_SECRET,)) == 42
    assert verify(SECRET, "verp", "x", sign(SECRET, "verp", "x"), (OTHER_SECRET,))
    assert not verify(SECRET, "verp", "x", sign("third", "verp", "x"), (OTHER_SECRET,))


@pytest.mark.parametrize(
    ("value", "run"),
    [("a", 1), ("ab", 2), ("abc", 3), ("aaab", 3), ("cba", 3), ("aXbYc", 1), ("abab", 2)],
)
def test_longest_run(value: str, run: int) -> None:
    assert keys._longest_run(value) == run
