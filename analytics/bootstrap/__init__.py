"""The bootstrap: a table with history landed as the lake's state at a point-in-time export's time T (or
a parallel scan's), before the stream's changes from T onward (docs/operations/bootstrap.md)."""

from analytics.bootstrap._boundary import SMALL_LIMIT, ExportOrder, read_export_order, stream_covered_from
from analytics.bootstrap._errors import BootstrapRefused, StreamGap
from analytics.bootstrap._export import ExportLocation, start_export, wait_for_export
from analytics.bootstrap._land import landed_files
from analytics.bootstrap._manifest import DataFile, ExportManifest, read_manifest, split_s3_uri
from analytics.bootstrap._run import BootstrapReport, bootstrap_export, check_coverage
from analytics.bootstrap._scan import CAVEAT, bootstrap_scan, scans_in_lake

__all__ = [
    "CAVEAT",
    "SMALL_LIMIT",
    "BootstrapRefused",
    "BootstrapReport",
    "DataFile",
    "ExportLocation",
    "ExportManifest",
    "ExportOrder",
    "StreamGap",
    "bootstrap_export",
    "bootstrap_scan",
    "check_coverage",
    "landed_files",
    "read_export_order",
    "read_manifest",
    "scans_in_lake",
    "split_s3_uri",
    "start_export",
    "stream_covered_from",
    "wait_for_export",
]
