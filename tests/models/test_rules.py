"""The registry's rules on their own: references, aliases, labels and names, as Vertex AI's
Model Registry accepts them; each refusal names the field, the value and what is valid."""

from __future__ import annotations

import pytest

from jupyter_gtc.exceptions import SpecError
from jupyter_gtc.registry import ModelRef, check_alias, check_labels, check_model_name, closest, parse_ref


def test_references_name_a_version_an_alias_or_the_default():
    assert parse_ref("llama-tiny") == ModelRef("llama-tiny")
    assert parse_ref("llama-tiny@3") == ModelRef("llama-tiny", version=3)
    assert parse_ref("llama-tiny@prod") == ModelRef("llama-tiny", alias="prod")
    assert str(parse_ref("llama-tiny@prod")) == "llama-tiny@prod"
    for bad in ("llama@", "llama@0", "llama@Prod", "@prod", "a/b@1", ""):
        with pytest.raises(SpecError) as e:
            parse_ref(bad)
        assert e.value.field == "model" and e.value.value == bad


@pytest.mark.parametrize("alias", ["prod", "candidate-2", "v3", "aBc", "a" * 128])
def test_vertex_aliases_are_accepted(alias):
    assert check_alias(alias) == alias


@pytest.mark.parametrize("alias", ["p", "Prod", "3prod", "prod-", "pr_od", "a" * 129, "", None])
def test_aliases_outside_vertex_pattern_are_refused_with_the_pattern(alias):
    with pytest.raises(SpecError) as e:
        check_alias(alias)
    assert e.value.field == "alias" and e.value.value == alias and "lowercase letter first" in str(e.value)


def test_a_numeric_alias_is_refused_as_it_would_name_a_version():
    with pytest.raises(SpecError) as e:
        check_alias("12")
    assert "cannot be a number" in str(e.value) and "version 12" in str(e.value)


def test_labels_follow_vertex_rules():
    assert check_labels({"team": "nlp", "stage": "", "größe": "klein-1"}) == {"team": "nlp", "stage": "",
                                                                             "größe": "klein-1"}
    for labels, field in (({"Team": "x"}, "labels.Team"), ({"1team": "x"}, "labels.1team"),
                          ({"team": "NLP"}, "labels.team"), ({"team": "a" * 64}, "labels.team"),
                          ({"team": "a b"}, "labels.team")):
        with pytest.raises(SpecError) as e:
            check_labels(labels)
        assert e.value.field == field
    with pytest.raises(SpecError, match="at most 64 labels"):
        check_labels({f"k{i}": "v" for i in range(65)})


def test_model_names_are_folder_names():
    assert check_model_name("llama-3.2_tiny") == "llama-3.2_tiny"
    for bad in ("../x", "a/b", "a@b", "-x", "", "x" * 129):
        with pytest.raises(SpecError):
            check_model_name(bad)


def test_did_you_mean_puts_the_closest_first():
    assert closest("lama-tiny", ["gemma", "llama-tiny"]).startswith("did you mean 'llama-tiny'?")
    assert "no models are registered yet" in closest("x", [])
