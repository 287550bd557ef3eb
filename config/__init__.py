"""The one frozen settings object. Imports nothing from the project but the error root (schema.errors)."""

from config.settings import (
    ArraySettings,
    AwsSettings,
    BootstrapSettings,
    CleanupSettings,
    ClockSettings,
    ConsumerSettings,
    ErasureSettings,
    LakeSettings,
    MetricsSettings,
    PolicySettings,
    ServiceSettings,
    Settings,
    SettingsError,
    SourceSettings,
    load_settings,
    settings_environment,
)

__all__ = [
    "ArraySettings",
    "AwsSettings",
    "BootstrapSettings",
    "CleanupSettings",
    "ClockSettings",
    "ConsumerSettings",
    "ErasureSettings",
    "LakeSettings",
    "MetricsSettings",
    "PolicySettings",
    "ServiceSettings",
    "Settings",
    "SettingsError",
    "SourceSettings",
    "load_settings",
    "settings_environment",
]
