# Builds kvroute's commands into a small static image:
#   docker build -t kvroute .
#   docker run -p 8080:8080 kvroute route -listen :8080 -backends http://vllm-0:8000,http://vllm-1:8000
FROM golang:1.26 AS build
WORKDIR /src
COPY go.mod go.sum ./
RUN go mod download
COPY . .
RUN CGO_ENABLED=0 go build -trimpath -ldflags="-s -w" -o /out/ ./cmd/...

FROM gcr.io/distroless/static-debian12:nonroot
COPY --from=build /out/ /usr/local/bin/
USER nonroot:nonroot
EXPOSE 8080
ENTRYPOINT []
CMD ["route", "-config", "/etc/kvroute/route.yaml"]
