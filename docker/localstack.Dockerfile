# The embedded local stack: moto (DynamoDB, Streams, SQS, SNS, S3, CloudWatch), the TTL emulator and the
# fake Array server, in one process. It listens on the container's loopback only; the other services of the
# compose file share its network namespace, as the processes of `make demo` share the host's loopback.
FROM python:3.11-slim-bookworm
WORKDIR /app
COPY pyproject.toml README.md ./
COPY config config
COPY schema schema
COPY pipeline pipeline
COPY processors processors
COPY analytics analytics
COPY devstack devstack
COPY entitlements entitlements
# amazon-kclpy is not needed by the stack; install the rest without it.
RUN pip install --no-cache-dir --no-deps . \
 && pip install --no-cache-dir "moto[server]==5.2.5" "boto3>=1.40,<2" "pydantic==2.14.3" \
      "pydantic-settings==2.16.3" "typer==0.29.1" "rich==15.0.0" "httpx==0.28.1" "tenacity==9.2.1" \
      "werkzeug==3.1.9" "orjson==3.13.0"
ENTRYPOINT ["entitlements"]
CMD ["local", "up", "--port", "4566"]
