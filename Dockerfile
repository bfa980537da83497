# Static, non-root flotilla-scheduler image.
FROM golang:1.26 AS build
WORKDIR /src
COPY go.mod go.sum ./
RUN go mod download
COPY . .
ARG VERSION=dev
RUN CGO_ENABLED=0 go build -trimpath -ldflags "-s -w -X main.version=${VERSION}" \
      -o /out/flotilla-scheduler ./cmd/flotilla-scheduler

# distroless/static: no shell, no package manager; :nonroot runs as 65532.
FROM gcr.io/distroless/static-debian12:nonroot
COPY --from=build /out/flotilla-scheduler /usr/local/bin/flotilla-scheduler
USER 65532:65532
ENTRYPOINT ["/usr/local/bin/flotilla-scheduler"]
