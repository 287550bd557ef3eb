"""The export's data files deleted once every one of them is landed: they hold every item of the table,
personal data included, in a bucket the erasure does not reach, while in the lake the erasure purges
them like every other row.

Only the data files go (`data/*.json.gz`); the manifests stay (counts, checksums, file names, the
export's ARN and time: no item), so a rerun still reads the export, finds every file in the lake and
lands nothing. S3's DeleteObject answers the same for a key already gone, so a rerun after a kill
part-way through the deletes finishes them.
"""

from __future__ import annotations

__all__ = ["S3Deleter", "delete_data_files"]

from typing import Any, Protocol

from analytics.bootstrap._errors import BootstrapRefused
from analytics.bootstrap._manifest import ExportManifest
from schema.aws_errors import converted
from schema.errors import EntitlementsError


class S3Deleter(Protocol):
    def delete_object(self, **kwargs: Any) -> dict[str, Any]: ...


def delete_data_files(s3: S3Deleter, manifest: ExportManifest) -> int:
    """Delete each of the export's data files; returns how many. A refused delete (no permission) is one
    line saying the export is landed but its files are left."""
    for data_file in manifest.files:
        try:
            with converted("S3 DeleteObject (export data file)"):
                s3.delete_object(Bucket=manifest.bucket, Key=data_file.key)
        except EntitlementsError as error:
            raise BootstrapRefused(
                f"the export is landed, but its data file {data_file.index + 1} could not be deleted "
                f"({getattr(error, 'code', None) or type(error).__name__}): the files hold every item; "
                "run again to retry, or delete the export's data folder"
            ) from None
    return len(manifest.files)
