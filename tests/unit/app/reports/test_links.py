"""Whether the email's links lead to the dashboard (app/reports/links): said, with what to set."""

from __future__ import annotations

from app.reports.links import check_links

HERE = "http://10.0.0.5:8050/"


def test_unset_says_to_set_it_to_the_address_the_page_was_opened_at():
    verdict = check_links("http://127.0.0.1:8050", False, HERE)
    assert not verdict.ok
    assert verdict.message.startswith("TOKENSHAPE_PUBLIC_URL is not set")
    assert "TOKENSHAPE_PUBLIC_URL=http://10.0.0.5:8050 and restart" in verdict.message


def test_another_address_is_named_with_the_fix():
    verdict = check_links("https://tokenshape.example.com", True, HERE)
    assert not verdict.ok and "but this page was opened at http://10.0.0.5:8050" in verdict.message
    assert "set TOKENSHAPE_PUBLIC_URL=http://10.0.0.5:8050" in verdict.message


def test_the_same_address_passes_default_ports_and_case_included():
    assert check_links("http://10.0.0.5:8050/", True, HERE).ok
    assert check_links("https://Dash.Example.com", True, "https://dash.example.com:443/").ok
    assert not check_links("http://dash.example.com", True, "https://dash.example.com/").ok


def test_a_value_that_is_no_web_address_is_named():
    verdict = check_links("dash.example.com", True, HERE)
    assert not verdict.ok and "is not an http:// or https:// address" in verdict.message
    assert check_links("https://dash.example.com", True, None).ok  # the CLI: nothing to compare
