"""A demo profile with a missing or mistyped field says which, in JSON's words, and what to do."""

import pytest

from bringup.core.client.demo_profile import load_profile
from bringup.core.errors import UserError


@pytest.mark.parametrize("text,message", [
    ('{"prompts": ["hi"]}', "'model' is missing; add it (a string), as in default.json"),
    ('{"model": "default", "prompts": 5}', "'prompts' must be a list, got 5; fix the file"),
    ('{"model": "default", "prompts": ["hi"], "max_tokens": "many"}', "'max_tokens' must be an integer, got 'many'"),
    ('{"model": "default", "prompts": ["hi"], "settings": []}', "'settings' must be an object, got []"),
    ('{"model": "default", "prompts": ["hi"], "temperature": "hot"}', "'temperature' must be a number, got 'hot'"),
])
def test_field_messages(tmp_path, text, message):
    path = tmp_path / "profile.json"
    path.write_text(text)
    with pytest.raises(UserError) as err:
        load_profile(path)
    assert message in str(err.value)
