"""Console users, sessions, CSRF tokens and proxies (outbox.web.console_auth)."""

from __future__ import annotations

import dataclasses
import io
from pathlib import Path

import pytest

from outbox.cli import main
from outbox.config import Settings
from outbox.errors import ConfigError
from outbox.preflight import problems
from outbox.web.console_auth import (
    Access,
    Role,
    SignInLimiter,
    hash_password,
    parse_networks,
    read_users,
    token_hash,
)
from tests.keys import OTHER_SECRET, SECRET

HASH = hash_password("correct horse")


def access(**values: object) -> Access:
    chosen: dict[str, object] = {"secret": SECRET, "console_users": f"ann:operator:{HASH}"}
    settings = dataclasses.replace(Settings(), **{**chosen, **values})  # type: ignore[arg-type]
    return Access.from_settings(settings)


def test_an_argon2_hash_has_commas_of_its_own_yet_entries_split() -> None:
    assert "," in HASH
    users = read_users(f"ann:operator:{HASH},bob:viewer:{HASH} cy:viewer:;dee:operator:")
    assert list(users) == ["ann", "bob", "cy", "dee"]
    assert users["ann"].role is Role.OPERATOR
    assert users["bob"].password_hash == HASH
    assert users["cy"].password_hash == ""
    assert users["ann"].may_act
    assert not users["bob"].may_act


def test_users_come_from_a_file_with_comments(tmp_path: Path) -> None:
    path = tmp_path / "users"
    path.write_text(f"# support\nann:viewer:{HASH}\n\n# on call\nbob:operator:{HASH}\n")
    users = read_users(str(path))
    assert {n: u.role for n, u in users.items()} == {"ann": Role.VIEWER, "bob": Role.OPERATOR}


@pytest.mark.parametrize(
    ("raw", "says"),
    [
        ("ann", "name:role:argon2-hash"),
        ("ann:viewer", "name:role:argon2-hash"),
        ("ann:root:", "viewer or operator"),
        ("ann:viewer:plaintext", "not an argon2 hash"),
        ("ann:viewer:,ann:operator:", "twice"),
        ("a b!:viewer:", "name:role"),
        ("/no/such/file", "cannot read"),
    ],
)
def test_a_bad_user_list_is_refused_and_names_the_setting(raw: str, says: str) -> None:
    with pytest.raises(ConfigError, match="OUTBOX_CONSOLE_USERS") as caught:
        read_users(raw)
    assert says in str(caught.value)
    assert "plaintext" not in str(caught.value)  # a value that may be a password is never shown


def test_settings_refuse_a_console_that_cannot_work() -> None:
    with pytest.raises(ConfigError, match="OUTBOX_SECRET"):
        Settings(console_users=f"ann:viewer:{HASH}").validate()
    with pytest.raises(ConfigError, match="TRUSTED_PROXIES"):
        Settings(secret=SECRET, console_sso_header="X-User").validate()
    with pytest.raises(ConfigError, match="SECURE_COOKIE"):
        Settings(console_secure_cookie="maybe").validate()
    with pytest.raises(ConfigError, match="OUTBOX_JAEGER_URL"):
        Settings(jaeger_url="jaeger:16686").validate()
    with pytest.raises(ConfigError, match="TRUSTED_PROXIES"):
        parse_networks("10.0.0.0/8, not-an-ip")
    assert not Settings().console_enabled


def test_sign_in_takes_the_right_password_only() -> None:
    a = access()
    user = a.sign_in("ann", "correct horse")
    assert user is not None
    assert user.name == "ann"
    assert a.sign_in("ann", "wrong") is None
    assert a.sign_in("nobody", "correct horse") is None
    assert a.sign_in("ann", "") is None


def test_a_user_without_a_hash_cannot_sign_in_by_password() -> None:
    a = access(console_users="ann:operator:")
    assert a.sign_in("ann", "") is None
    assert a.sign_in("ann", "anything") is None


def test_a_session_round_trips_and_expires() -> None:
    a = access()
    session = a.new_session("ann", now=1000.0)
    cookie = a.cookie(session)
    assert a.session(cookie, now=1001.0) == session
    assert a.session(cookie, now=1000.0 + a.session_seconds) is None  # expired


@pytest.mark.parametrize(
    "tamper",
    [
        lambda c: c[:-1] + ("0" if c[-1] != "0" else "1"),
        lambda c: "x" + c,
        lambda c: c.split(".")[0],
        lambda c: c + ".extra",
        lambda c: "",
    ],
)
def test_a_tampered_cookie_is_no_session(tamper: object) -> None:
    a = access()
    cookie = a.cookie(a.new_session("ann"))
    assert a.session(tamper(cookie)) is None  # type: ignore[operator]


def test_a_cookie_of_another_secret_is_refused_but_a_previous_secret_still_works() -> None:
    old = access()
    cookie = old.cookie(old.new_session("ann"))
    other = dataclasses.replace(old, secret=OTHER_SECRET)
    assert other.session(cookie) is None
    rotated = dataclasses.replace(old, secret=OTHER_SECRET, previous=(SECRET,))
    assert rotated.session(cookie) is not None


def test_a_held_session_holds_while_its_user_keeps_the_role_of_sign_in() -> None:
    a = access(console_users=f"ann:operator:{HASH},bob:viewer:{HASH}")
    session = a.new_session("ann")
    user = a.holder(session, user_name="ann", role="operator")
    assert user is not None
    assert user.role is Role.OPERATOR
    # Removed from the list, demoted (or promoted), left without a hash: it ends.
    assert (
        dataclasses.replace(a, users={}).holder(session, user_name="ann", role="operator") is None
    )
    demoted = access(console_users=f"ann:viewer:{HASH}")
    assert demoted.holder(session, user_name="ann", role="operator") is None
    assert a.holder(a.new_session("bob"), user_name="bob", role="operator") is None
    no_hash = access(console_users="ann:operator:")
    assert no_hash.holder(session, user_name="ann", role="operator") is None
    # The row must be the cookie's user's.
    assert a.holder(session, user_name="bob", role="operator") is None


def test_the_server_keeps_a_hash_of_the_session_nonce_never_the_nonce() -> None:
    a = access()
    one, two = a.new_session("ann"), a.new_session("ann")
    assert len(token_hash(one)) == 32
    assert token_hash(one) == token_hash(dataclasses.replace(one))
    assert token_hash(one) != token_hash(two)
    assert one.nonce.encode() not in token_hash(one)
    assert len(one.nonce) >= 43  # 32 random bytes
    assert a.expires_at(one).timestamp() == one.expires


def test_the_csrf_token_belongs_to_one_session() -> None:
    a = access()
    one, two = a.new_session("ann"), a.new_session("ann")
    assert a.csrf_ok(one, a.csrf_token(one))
    assert not a.csrf_ok(one, a.csrf_token(two))
    assert not a.csrf_ok(one, "")
    assert not a.csrf_ok(one, a.csrf_token(one)[:-1])


def test_the_proxy_header_counts_only_from_a_trusted_address() -> None:
    a = access(console_sso_header="X-Forwarded-User", console_trusted_proxies="10.0.0.0/8, ::1")
    headers = {"x-forwarded-user": "ann"}
    ann = a.from_proxy("10.1.2.3", headers)
    assert ann is not None
    assert ann.role is Role.OPERATOR
    vera = a.from_proxy("::1", {"x-forwarded-user": "vera"})
    assert vera is not None
    assert vera.role is Role.VIEWER
    assert a.from_proxy("192.168.1.1", headers) is None
    assert a.from_proxy(None, headers) is None
    assert a.from_proxy("not an ip", headers) is None
    assert a.from_proxy("10.1.2.3", {}) is None
    assert a.from_proxy("10.1.2.3", {"x-forwarded-user": "a b"}) is None


def test_cookies_are_secure_unless_turned_off_for_loopback_development() -> None:
    assert access().cookie_name.startswith("__Host-")
    assert access().secure
    plain = access(console_secure_cookie="off")
    assert not plain.secure
    assert not plain.cookie_name.startswith("__Host-")


def test_a_sealed_value_opens_only_under_the_secret() -> None:
    a = access()
    sealed = a.seal("carol@example.com")
    assert "carol" not in sealed
    assert a.unseal(sealed) == "carol@example.com"
    assert dataclasses.replace(a, secret=OTHER_SECRET).unseal(sealed) is None
    assert a.unseal("garbage") is None


def test_outbox_console_hash_password_reads_stdin_and_prints_a_hash_that_verifies(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setattr("sys.stdin", io.StringIO("s3cret phrase\n"))
    assert main(["console", "hash-password"]) == 0
    printed = capsys.readouterr().out.strip()
    assert printed.startswith("$argon2id$")
    assert "s3cret" not in printed
    users = read_users(f"ann:viewer:{printed}")
    a = dataclasses.replace(access(), users=users)
    assert a.sign_in("ann", "s3cret phrase") is not None


def test_outbox_web_preflight_names_a_broken_console_setting() -> None:
    broken = Settings(secret=SECRET, console_users="ann:admin:")
    assert problems(broken, ["web"]) == [
        "OUTBOX_CONSOLE_USERS: ann's role must be viewer or operator"
    ]
    assert problems(broken, ["worker"]) == []  # only `outbox web` reads it
    assert problems(Settings(secret=SECRET, console_users=f"ann:viewer:{HASH}"), ["web"]) == []


def test_failed_sign_ins_are_limited_per_key_for_a_window() -> None:
    limiter = SignInLimiter(failures=3, window=60.0)
    keys = ("name:ann", "client:10.0.0.1")
    for second in range(3):
        assert limiter.allowed(keys, now=float(second))
        limiter.failed(keys, now=float(second))
    assert not limiter.allowed(keys, now=10.0)
    assert not limiter.allowed(("name:bob", "client:10.0.0.1"), now=10.0)  # the same client
    assert not limiter.allowed(("name:ann", "client:10.0.0.2"), now=10.0)  # the same name
    assert limiter.allowed(("name:bob", "client:10.0.0.2"), now=10.0)
    assert limiter.allowed(keys, now=60.5)  # the first failure aged out


def test_an_attempt_in_progress_counts_until_it_is_withdrawn() -> None:
    limiter = SignInLimiter(failures=2, window=60.0)
    keys = ("name:ann",)
    first = limiter.begin(keys, now=1.0)
    second = limiter.begin(keys, now=1.0)
    assert first == second == 1.0
    assert limiter.begin(keys, now=1.0) is None  # two checks under way: the limit
    assert second is not None
    limiter.withdraw(keys, second)  # it signed in
    assert limiter.begin(keys, now=2.0) == 2.0
    assert limiter.begin(keys, now=2.0) is None
