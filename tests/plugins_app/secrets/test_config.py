"""HUB_SECRETS_KEY and HUB_SECRETS_KEY_FALLBACKS, read once into a typed config."""

from plugins_app.services.secrets.config import SecretsConfig


def test_the_key_and_its_fallbacks_are_read():
    assert SecretsConfig.from_env({}) == SecretsConfig(key="", key_fallbacks=())
    config = SecretsConfig.from_env({"HUB_SECRETS_KEY": "new", "HUB_SECRETS_KEY_FALLBACKS": "old, older ,"})
    assert (config.key, config.key_fallbacks) == ("new", ("old", "older"))
