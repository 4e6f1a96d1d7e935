"""The Kubernetes HTTP API: the API server's second front door, for kubectl and client libraries.

Only translation lives here: a request's path, query and JSON body become the same registry calls
the gRPC service makes (`ResourcesService.call`, `Reads.watch`), with the same authentication (the
verified client certificate: CN = user, O = groups), authorization, validation, watch cache,
fencing and audit log; answers and errors are turned back into Kubernetes' JSON shapes
(objects, lists, WatchEvents, Tables, metav1.Status). One module per job:

* `server`    - the aiohttp application and its `async with` lifetime (TLS, limits, routing)
* `tls`       - the serving SSLContext, reloaded from the same files as the gRPC side
* `authn`     - the client certificate's CN and O as the caller's identity
* `routes`    - URL path -> (kind, namespace, name, subresource)
* `params`    - query parameters and the X-Kse-Fence header, checked
* `discovery` - /api, /apis, resource lists, /version, generated from the kind table
* `handlers`  - one thin function per verb
* `watch`     - streaming WatchEvents
* `codec`     - JSON <-> protobuf objects (the manifest codec), field validation
* `status`    - exceptions -> metav1.Status with kube-apiserver's codes and reasons
* `tables`    - meta.k8s.io/v1 Table output (the column table per kind)
* `patch`     - JSON merge patch and JSON patch (RFC 7386, RFC 6902)
* `strategic_merge` - strategic merge patch (upstream's strategicpatch)
* `apply`     - server-side apply and managedFields of every write (structured-merge-diff)
* `fieldpath` - field paths and sets of objects, in the FieldsV1 encoding
* `listtypes` - the one table of list semantics (merge keys, listType) and the schema walk
* `openapi`   - /openapi/v2 and /openapi/v3, generated from the protos and the kind table
"""
