# The consumer image: JRE 17, Python 3.11, amazon-kclpy with its jars, and the KCL launcher.
# Build from the repository root: docker build -f docker/consumer.Dockerfile .

FROM maven:3.9-eclipse-temurin-17 AS launcher
WORKDIR /build
COPY pipeline/launcher/pom.xml pipeline/launcher/pom.xml
RUN mvn -q -B -f pipeline/launcher/pom.xml dependency:go-offline
COPY pipeline/launcher/src pipeline/launcher/src
RUN mvn -q -B -f pipeline/launcher/pom.xml package -DskipTests

FROM python:3.11-slim-bookworm AS app
RUN apt-get update \
 && apt-get install -y --no-install-recommends openjdk-17-jre-headless maven \
 && rm -rf /var/lib/apt/lists/*
WORKDIR /app
COPY pyproject.toml README.md ./
COPY scripts/install_kclpy.py scripts/install_kclpy.py
# amazon-kclpy's jars are staged through Maven (see scripts/install_kclpy.py), then Maven is not needed.
RUN python scripts/install_kclpy.py && rm -rf /root/.m2 .cache
COPY config config
COPY schema schema
COPY pipeline pipeline
COPY processors processors
COPY analytics analytics
COPY devstack devstack
COPY entitlements entitlements
COPY service service
# Maven does not stay.
RUN pip install --no-cache-dir . \
 && apt-get purge -y maven && apt-get autoremove -y
COPY --from=launcher /build/pipeline/launcher/target/entitlements-kcl-launcher.jar /app/launcher/
COPY --from=launcher /build/pipeline/launcher/target/lib /app/launcher/lib
ENV ENTITLEMENTS_CONSUMER__LAUNCHER_JAR=/app/launcher/entitlements-kcl-launcher.jar \
    ENTITLEMENTS_CONSUMER__STATE_DIR=/var/lib/entitlements \
    ENTITLEMENTS_LAKE__ROOT=/var/lib/entitlements/lake
RUN useradd --system --home /var/lib/entitlements entitlements \
 && mkdir -p /var/lib/entitlements && chown entitlements /var/lib/entitlements
USER entitlements
# SIGTERM reaches `entitlements consume`, which stops the daemon gracefully (checkpoints, then exits).
STOPSIGNAL SIGTERM
ENTRYPOINT ["entitlements"]
CMD ["consume"]
