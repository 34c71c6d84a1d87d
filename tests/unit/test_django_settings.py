"""settings.OUTBOX merged under the environment, and which views PriorityMiddleware marks (pure)."""

from __future__ import annotations

from pathlib import Path

import pytest

from outbox.django.priority import current, high_priority, listed
from outbox.django.project_settings import NAMES, apply, merged


def test_settings_outbox_fills_what_the_environment_leaves_unset() -> None:
    outbox = {"OUTBOX_FROM": "Shop <shop@shop.example>", "OUTBOX_API_RATE": 50, "REDIS_URL": ""}
    added, problems = merged(outbox, None, {"OUTBOX_API_RATE": "80"})
    assert problems == []
    assert added == {"OUTBOX_FROM": "Shop <shop@shop.example>", "REDIS_URL": ""}


def test_an_empty_environment_variable_counts_as_unset() -> None:
    added, _ = merged({"OUTBOX_SECRET": "s"}, None, {"OUTBOX_SECRET": ""})
    assert added == {"OUTBOX_SECRET": "s"}


class ProjectSettings:
    """Django's settings object, as far as apply reads it."""

    def __init__(self, **values: object) -> None:
        self.__dict__.update(values)

    def is_overridden(self, name: str) -> bool:
        return name in self.__dict__


def test_apply_fills_the_environment_where_it_is_unset_or_empty() -> None:
    environ = {"OUTBOX_SECRET": "", "OUTBOX_API_RATE": "80"}
    project = ProjectSettings(
        OUTBOX={"OUTBOX_SECRET": "from-settings", "OUTBOX_API_RATE": 50, "OUTBOX_FORM": "x"},
        DEFAULT_FROM_EMAIL="Shop <shop@shop.example>",
    )
    problems = apply(project, environ)
    assert environ == {
        "OUTBOX_SECRET": "from-settings",
        "OUTBOX_API_RATE": "80",
        "OUTBOX_FROM": "Shop <shop@shop.example>",
    }
    assert problems == [
        "settings.OUTBOX: 'OUTBOX_FORM' is no Outbox setting (see docs/configuration.md)"
    ]


def test_apply_takes_no_from_of_a_project_that_sets_none() -> None:
    environ: dict[str, str] = {}
    assert apply(ProjectSettings(), environ) == []
    assert environ == {}


def test_numbers_and_paths_are_written_as_text() -> None:
    added, _ = merged({"OUTBOX_WEB_TIMEOUT": 2.5, "OUTBOX_TEMPLATES": Path("/t")}, None, {})
    assert added == {"OUTBOX_WEB_TIMEOUT": "2.5", "OUTBOX_TEMPLATES": "/t"}


@pytest.mark.parametrize(
    ("outbox", "problem"),
    [
        ({"OUTBOX_FORM": "x"}, "'OUTBOX_FORM' is no Outbox setting"),
        ({"from": "x"}, "'from' is no Outbox setting"),
        ({"OUTBOX_PACE_BY_MX": True}, "must be a string or a number"),
        ({"OUTBOX_FROM": ["a"]}, "must be a string or a number"),
        (["OUTBOX_FROM"], "must be a dict"),
    ],
)
def test_what_outbox_cannot_take_is_a_problem_and_added_nowhere(
    outbox: object, problem: str
) -> None:
    added, problems = merged(outbox, None, {})
    assert added == {}
    assert len(problems) == 1
    assert problem in problems[0]


def test_default_from_email_is_the_from_only_when_outbox_from_is_given_nowhere() -> None:
    shop = "Shop <shop@shop.example>"
    assert merged(None, shop, {})[0] == {"OUTBOX_FROM": shop}
    assert merged({"OUTBOX_FROM": "A <a@a.example>"}, shop, {})[0] == {
        "OUTBOX_FROM": "A <a@a.example>"
    }
    assert merged(None, shop, {"OUTBOX_FROM": "E <e@e.example>"})[0] == {}
    assert merged(None, None, {})[0] == {}  # Django's own default is no sender


def test_every_setting_of_docs_configuration_is_a_name_outbox_takes() -> None:
    assert {"DATABASE_URL", "REDIS_URL", "SMTP_URL", "OUTBOX_FROM", "OUTBOX_SECRET"} <= NAMES


class Base:
    @classmethod
    def as_view(cls) -> object:
        def view() -> None: ...

        view.view_class = cls  # type: ignore[attr-defined]  # as Django's as_view does
        return view


class Child(Base):
    pass


class Other:
    pass


def plain_view() -> None: ...


def test_a_listed_view_class_marks_its_subclasses_and_a_function_only_itself() -> None:
    assert listed(Base.as_view(), (Base,))  # type: ignore[arg-type]
    assert listed(Child.as_view(), (Base,))  # type: ignore[arg-type]
    assert not listed(Base.as_view(), (Child, Other))  # type: ignore[arg-type]
    assert listed(plain_view, (plain_view,))
    assert not listed(plain_view, (Base,))


def test_high_priority_holds_inside_its_block_only_and_nests() -> None:
    assert current() is None
    with high_priority():
        assert current() == "high"
        with high_priority():
            assert current() == "high"
        assert current() == "high"
    assert current() is None

    @high_priority()
    def send() -> str | None:
        return current()

    assert send() == "high"
    assert current() is None
