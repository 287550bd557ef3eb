"""The one frozen settings object. A leaf: imports nothing else from the project."""

from config.settings import (
    ArraySettings,
    AwsSettings,
    ClockSettings,
    ConsumerSettings,
    ErasureSettings,
    LakeSettings,
    PolicySettings,
    Settings,
    load_settings,
    settings_environment,
)

__all__ = [
    "ArraySettings",
    "AwsSettings",
    "ClockSettings",
    "ConsumerSettings",
    "ErasureSettings",
    "LakeSettings",
    "PolicySettings",
    "Settings",
    "load_settings",
    "settings_environment",
]
