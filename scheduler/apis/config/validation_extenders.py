"""Validation of ``extenders`` (upstream ``validateExtenders`` in
``pkg/scheduler/apis/config/validation/validation.go``), with upstream's messages:

- ``extenders[i].weight: Invalid value: 0: must have a positive weight applied to it`` when the
  extender has a prioritizeVerb;
- ``extenders: Invalid value: "found 2 extenders implementing bind": only one extender can
  implement bind``;
- ``extenders[i].managedResources[j].name``: a qualified name that is an extended resource
  (domain-prefixed, outside ``kubernetes.io/``), no duplicates across extenders.

Where kse is stricter than upstream, on purpose (upstream fails later, at the first call, or never):

- ``urlPrefix`` is required and must be an ``http://`` or ``https://`` URL with a host;
- ``enableHTTPS: true`` needs an ``https://`` urlPrefix, and a ``tlsConfig`` needs one too (upstream
  would silently send it over plain HTTP);
- ``tlsConfig.certData``/``keyData``/``caData`` must be base64, a cert needs its key (and the reverse),
  and ``*File`` and ``*Data`` of the same item are exclusive (client-go's TLS config refuses both);
- ``httpTimeout`` must be positive when given (0 means the default, as upstream).
"""

from __future__ import annotations

import base64
import binascii
from urllib.parse import urlsplit

from kse.objects.names import is_qualified_name

from .types import Extender, ExtenderTLSConfig, forbidden, invalid, required

_DEFAULT_NAMESPACE_PREFIX = "kubernetes.io/"


def is_extended_resource_name(name: str) -> bool:
    """Upstream v1helper.IsExtendedResourceName: domain-prefixed, outside kubernetes.io."""
    if "/" not in name or _DEFAULT_NAMESPACE_PREFIX in name or name.startswith("requests."):
        return False
    return not is_qualified_name("requests." + name)


def validate_extenders(extenders: list[Extender]) -> list[str]:
    """Every problem of the ``extenders`` list, one line each, naming the field."""
    errs: list[str] = []
    binders = 0
    managed: set[str] = set()
    for i, ext in enumerate(extenders):
        path = f"extenders[{i}]"
        errs += _validate_url(path, ext)
        if ext.prioritize_verb and ext.weight <= 0:
            errs.append(invalid(f"{path}.weight", ext.weight, "must have a positive weight applied to it"))
        if ext.bind_verb:
            binders += 1
        if ext.http_timeout is not None and ext.http_timeout < 0:
            errs.append(invalid(f"{path}.httpTimeout", f"{ext.http_timeout:g}s", "must not be negative"))
        for j, res in enumerate(ext.managed_resources):
            rpath = f"{path}.managedResources[{j}].name"
            msgs = is_qualified_name(res.name)
            errs += [invalid(rpath, res.name, msg) for msg in msgs]
            if not msgs and not is_extended_resource_name(res.name):
                errs.append(invalid(rpath, res.name, "is an invalid extended resource name"))
            if res.name in managed:
                errs.append(invalid(rpath, res.name, "duplicate extender managed resource name"))
            managed.add(res.name)
        if ext.tls_config is not None:
            errs += _validate_tls(f"{path}.tlsConfig", ext.tls_config)
    if binders > 1:
        errs.append(
            invalid(
                "extenders",
                f"found {binders} extenders implementing bind",
                "only one extender can implement bind",
            )
        )
    return errs


def _validate_url(path: str, ext: Extender) -> list[str]:
    if not ext.url_prefix:
        return [
            required(f"{path}.urlPrefix", "the extender's base URL, e.g. http://127.0.0.1:8888/scheduler")
        ]
    try:
        parts = urlsplit(ext.url_prefix)
        parts.port  # noqa: B018  (raises ValueError on a bad port)
    except ValueError as e:
        return [invalid(f"{path}.urlPrefix", ext.url_prefix, f"not a URL: {e}")]
    if parts.scheme not in ("http", "https") or not parts.hostname:
        return [
            invalid(f"{path}.urlPrefix", ext.url_prefix, "must be an http:// or https:// URL with a host")
        ]
    errs = []
    if (ext.enable_https or ext.tls_config is not None) and parts.scheme != "https":
        what = "enableHTTPS" if ext.enable_https else "tlsConfig"
        errs.append(
            invalid(f"{path}.urlPrefix", ext.url_prefix, f"must be an https:// URL when {what} is set")
        )
    return errs


def decode_data(value: str) -> bytes:
    """A Go ``[]byte`` field's JSON text (standard base64). Raises ValueError."""
    try:
        return base64.b64decode(value, validate=True)
    except (binascii.Error, ValueError) as e:
        raise ValueError(f"must be base64 ({e})") from None


def _validate_tls(path: str, tls: ExtenderTLSConfig) -> list[str]:
    errs: list[str] = []
    for name in ("cert", "key", "ca"):
        data: str = getattr(tls, f"{name}_data")
        if data:
            try:
                decode_data(data)
            except ValueError as e:
                errs.append(
                    invalid(f"{path}.{name}Data", "<redacted>" if name == "key" else data[:40], str(e))
                )
            if getattr(tls, f"{name}_file"):
                errs.append(forbidden(f"{path}.{name}Data", f"{name}File and {name}Data are exclusive"))
    has_cert = bool(tls.cert_file or tls.cert_data)
    has_key = bool(tls.key_file or tls.key_data)
    if has_cert and not has_key:
        errs.append(required(f"{path}.keyFile", "a client certificate needs its key (keyFile or keyData)"))
    if has_key and not has_cert:
        errs.append(required(f"{path}.certFile", "a client key needs its certificate (certFile or certData)"))
    return errs
