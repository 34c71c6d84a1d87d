FROM python:3.11-slim
WORKDIR /app
COPY pyproject.toml README.md ./
COPY outbox outbox
RUN pip install --no-cache-dir .
CMD ["outbox", "relay"]
