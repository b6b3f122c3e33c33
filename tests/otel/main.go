// Test infrastructure only: a minimal OpenTelemetry Collector distribution, the real collector the
// tracing tests send ramjet's spans through (OTLP in over HTTP or gRPC, OTLP/HTTP JSON out to a
// sink the test runs). Built by build.sh, cached under target/otel/<stamp>/.
//
// This is what the collector builder (ocb) would generate for these components, written by hand
// so the build needs nothing but `go build`. Every go.opentelemetry.io/collector module is pinned
// to one release in go.mod (v0.165.0, with the stable modules at v1.71.0): the modules of
// different releases do not build together.
package main

import (
	"log"

	"go.opentelemetry.io/collector/component"
	"go.opentelemetry.io/collector/confmap"
	"go.opentelemetry.io/collector/confmap/provider/envprovider"
	"go.opentelemetry.io/collector/confmap/provider/fileprovider"
	"go.opentelemetry.io/collector/confmap/provider/yamlprovider"
	"go.opentelemetry.io/collector/exporter/debugexporter"
	"go.opentelemetry.io/collector/exporter/otlphttpexporter"
	"go.opentelemetry.io/collector/otelcol"
	"go.opentelemetry.io/collector/processor/batchprocessor"
	"go.opentelemetry.io/collector/receiver/otlpreceiver"
	"go.opentelemetry.io/collector/service/telemetry/otelconftelemetry"
)

func main() {
	settings := otelcol.CollectorSettings{
		BuildInfo: component.BuildInfo{
			Command:     "otelcol",
			Description: "ramjet's test collector",
			Version:     "0.165.0",
		},
		Factories: factories,
		ConfigProviderSettings: otelcol.ConfigProviderSettings{
			ResolverSettings: confmap.ResolverSettings{
				// --config FILE (a path is a file: URI); yaml: for --set; env: because the
				// command makes it the default scheme of ${VAR} and refuses to start without it.
				ProviderFactories: []confmap.ProviderFactory{
					envprovider.NewFactory(),
					fileprovider.NewFactory(),
					yamlprovider.NewFactory(),
				},
			},
		},
	}
	if err := otelcol.NewCommand(settings).Execute(); err != nil {
		log.Fatal(err)
	}
}

func factories() (otelcol.Factories, error) {
	var err error
	f := otelcol.Factories{Telemetry: otelconftelemetry.NewFactory()}
	if f.Receivers, err = otelcol.MakeFactoryMap(otlpreceiver.NewFactory()); err != nil {
		return f, err
	}
	if f.Processors, err = otelcol.MakeFactoryMap(batchprocessor.NewFactory()); err != nil {
		return f, err
	}
	if f.Exporters, err = otelcol.MakeFactoryMap(
		otlphttpexporter.NewFactory(),
		debugexporter.NewFactory(),
	); err != nil {
		return f, err
	}
	return f, nil
}
