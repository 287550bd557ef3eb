# The consumer image (consume, the cleanup retry worker, the erasure worker, the setup commands): JRE 17,
# Python 3.11, and the project with amazon-kclpy and the KCL launcher, installed by scripts/install.py
# into /opt/entitlements, as tests/docker installs them into a fresh environment and runs every service.
# Build from the repository root: docker build -f docker/consumer.Dockerfile .
FROM python:3.11-slim-bookworm
ENV PIP_NO_CACHE_DIR=1 PIP_DISABLE_PIP_VERSION_CHECK=1
RUN apt-get update \
 && apt-get install -y --no-install-recommends openjdk-17-jre-headless \
 && rm -rf /var/lib/apt/lists/*
WORKDIR /src
COPY pyproject.toml README.md ./
COPY scripts/install.py scripts/install.py
COPY config config
COPY schema schema
COPY pipeline pipeline
COPY processors processors
COPY analytics analytics
COPY devstack devstack
COPY entitlements entitlements
COPY service service
# Maven and the JDK build amazon-kclpy's jars and the launcher, then leave with the sources.
RUN apt-get update \
 && apt-get install -y --no-install-recommends openjdk-17-jdk-headless maven \
 && python -m venv /opt/entitlements \
 && /opt/entitlements/bin/python scripts/install.py --launcher /opt/entitlements/launcher \
 && apt-get purge -y openjdk-17-jdk-headless maven && apt-get autoremove -y \
 && rm -rf /var/lib/apt/lists/* /root/.m2 /src
ENV PATH=/opt/entitlements/bin:$PATH \
    ENTITLEMENTS_CONSUMER__LAUNCHER_JAR=/opt/entitlements/launcher/entitlements-kcl-launcher.jar \
    ENTITLEMENTS_CONSUMER__STATE_DIR=/var/lib/entitlements \
    ENTITLEMENTS_LAKE__ROOT=/var/lib/entitlements/lake
RUN useradd --system --home /var/lib/entitlements entitlements \
 && mkdir -p /var/lib/entitlements /var/lib/entitlements-metrics \
 && chown entitlements /var/lib/entitlements /var/lib/entitlements-metrics
USER entitlements
WORKDIR /var/lib/entitlements
# SIGTERM reaches `entitlements consume`, which stops the daemon gracefully (checkpoints, then exits).
STOPSIGNAL SIGTERM
ENTRYPOINT ["entitlements"]
CMD ["consume"]
