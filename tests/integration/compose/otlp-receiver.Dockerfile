# The test receiver (otlp_receiver.py) on the control plane's image, whose virtualenv has
# the OTLP protobuf definitions (opentelemetry-proto comes with the exporter).
ARG FASTWORKER_IMAGE=fastworker-control-plane:latest
FROM ${FASTWORKER_IMAGE}
COPY otlp_receiver.py /app/otlp_receiver.py
EXPOSE 4318
HEALTHCHECK --interval=2s --timeout=3s --retries=10 \
    CMD ["python3", "-c", "import urllib.request; urllib.request.urlopen('http://127.0.0.1:4318/spans')"]
ENTRYPOINT ["python3", "/app/otlp_receiver.py", "--host", "0.0.0.0", "--port", "4318"]
