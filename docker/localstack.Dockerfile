# The embedded local stack: moto (DynamoDB, Streams, SQS, SNS, S3, CloudWatch), the TTL emulator, the
# fake Array and transactions-service and the entitlements service, in one process (`local up`). It
# listens on the container's loopback only; the other services of the compose file share its network
# namespace, as the processes of `make demo` share the host's loopback. The project is installed by
# scripts/install.py, as in the consumer image: the CLI imports amazon-kclpy, so the stack has it too.
# Build from the repository root: docker build -f docker/localstack.Dockerfile .
FROM python:3.11-slim-bookworm
ENV PIP_NO_CACHE_DIR=1 PIP_DISABLE_PIP_VERSION_CHECK=1
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
# Maven (and the JRE it needs) stages amazon-kclpy's jars, then leaves with the sources.
RUN apt-get update \
 && apt-get install -y --no-install-recommends maven \
 && python -m venv /opt/entitlements \
 && /opt/entitlements/bin/python scripts/install.py \
 && apt-get purge -y maven && apt-get autoremove -y \
 && rm -rf /var/lib/apt/lists/* /root/.m2 /src
ENV PATH=/opt/entitlements/bin:$PATH
RUN useradd --system --home /var/lib/entitlements entitlements \
 && mkdir -p /var/lib/entitlements /var/lib/entitlements-metrics \
 && chown entitlements /var/lib/entitlements /var/lib/entitlements-metrics
USER entitlements
WORKDIR /var/lib/entitlements
ENTRYPOINT ["entitlements"]
CMD ["local", "up", "--port", "4566", "--array-port", "8765", "--service-port", "8780", "--no-setup"]
