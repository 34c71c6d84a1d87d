#!/usr/bin/env python
"""The test project's manage.py, as ``django-admin startproject`` writes one."""

import os
import sys
from pathlib import Path

if __name__ == "__main__":
    sys.path.insert(0, str(Path(__file__).resolve().parents[2]))  # the repository
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "tests.django_project.configured")
    from django.core.management import execute_from_command_line

    execute_from_command_line(sys.argv)
