# The Jaeger stand-in of compose.offline.yaml: an OTLP/HTTP receiver (the tests'
# otlp_receiver.py) that decodes the real protobuf and lists what it got at GET /spans.
# Built on the same base as FastWorker's images, so it needs no image Compose has not
# built yet; the OTLP definitions come from PyPI, pinned to the versions in uv.lock.
ARG BASE_IMAGE=fastworker-base:bookworm
FROM ${BASE_IMAGE}
RUN python3 -m venv /opt/receiver \
    && /opt/receiver/bin/pip install --quiet --no-cache-dir --disable-pip-version-check \
        "opentelemetry-proto==1.45.2" "protobuf==7.36.2"
COPY otlp_receiver.py /app/otlp_receiver.py
USER 10001
EXPOSE 4318
HEALTHCHECK --interval=2s --timeout=3s --retries=10 \
    CMD ["/opt/receiver/bin/python", "-c", "import urllib.request; urllib.request.urlopen('http://127.0.0.1:4318/spans')"]
ENTRYPOINT ["/opt/receiver/bin/python", "/app/otlp_receiver.py", "--host", "0.0.0.0", "--port", "4318"]
