//! The deployment's OpenTelemetry export (`--otlp-endpoint`): mcp-edge's
//! spans, through `tracing-opentelemetry`, and its metrics, through a
//! `metrics` recorder over an OpenTelemetry meter, both sent over OTLP/HTTP
//! (protobuf) by `opentelemetry-otlp`, batched on the SDK's own threads.
//!
//! The endpoint is a base URL, as `OTEL_EXPORTER_OTLP_ENDPOINT` means one:
//! spans go to `{base}/v1/traces`, metrics to `{base}/v1/metrics`. Without
//! the flag, the export runs when `OTEL_EXPORTER_OTLP_ENDPOINT` (or a
//! signal's own `OTEL_EXPORTER_OTLP_TRACES_ENDPOINT` or
//! `OTEL_EXPORTER_OTLP_METRICS_ENDPOINT`) is set, and every `OTEL_*`
//! variable the OpenTelemetry SDK and exporter read applies (headers,
//! timeout, compression, service name, resource, sampler, batch and export
//! intervals); the flag takes the endpoint's place only.

use std::collections::HashMap;
use std::error::Error;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

use metrics::{CounterFn, GaugeFn, HistogramFn, Key, KeyName, Metadata, SharedString, Unit};
use opentelemetry::KeyValue;

use opentelemetry::trace::TracerProvider as _;
use opentelemetry_otlp::{Protocol, WithExportConfig};
use opentelemetry_sdk::metrics::{Aggregation, Instrument, SdkMeterProvider, Stream};
use opentelemetry_sdk::trace::SdkTracerProvider;
use opentelemetry_sdk::Resource;

/// The service name without `OTEL_SERVICE_NAME`.
const SERVICE: &str = "mcp-edge-reference";

/// The environment variables that ask for the export without the flag.
const ENDPOINT_VARIABLES: &[&str] = &[
    "OTEL_EXPORTER_OTLP_ENDPOINT",
    "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT",
    "OTEL_EXPORTER_OTLP_METRICS_ENDPOINT",
];

/// The export's providers: the tracing layer and the metrics recorder
/// feed them; [`Otlp::shutdown`] sends what they still hold.
pub struct Otlp {
    tracer: SdkTracerProvider,
    meter: SdkMeterProvider,
}

impl Otlp {
    /// The export to `endpoint` (a base URL), or to where the `OTEL_*`
    /// variables say; `None` when neither names an endpoint.
    pub fn new(endpoint: Option<&str>) -> Result<Option<Self>, Box<dyn Error>> {
        let from_env = ENDPOINT_VARIABLES
            .iter()
            .any(|name| std::env::var(name).is_ok_and(|value| !value.is_empty()));
        if endpoint.is_none() && !from_env {
            return Ok(None);
        }
        let base = endpoint.map(|endpoint| endpoint.trim_end_matches('/'));
        let resource = resource();
        let mut spans = opentelemetry_otlp::SpanExporter::builder()
            .with_http()
            .with_protocol(Protocol::HttpBinary);
        if let Some(base) = base {
            spans = spans.with_endpoint(format!("{base}/v1/traces"));
        }
        let tracer = SdkTracerProvider::builder()
            .with_batch_exporter(spans.build()?)
            .with_resource(resource.clone())
            .build();
        let mut metrics = opentelemetry_otlp::MetricExporter::builder()
            .with_http()
            .with_protocol(Protocol::HttpBinary);
        if let Some(base) = base {
            metrics = metrics.with_endpoint(format!("{base}/v1/metrics"));
        }
        let meter = SdkMeterProvider::builder()
            .with_periodic_exporter(metrics.build()?)
            .with_resource(resource)
            .with_view(operation_buckets)
            .build();
        Ok(Some(Self { tracer, meter }))
    }

    /// The `tracing` layer that exports spans.
    pub fn layer<S>(&self) -> impl tracing_subscriber::Layer<S>
    where
        S: tracing::Subscriber + for<'span> tracing_subscriber::registry::LookupSpan<'span>,
    {
        tracing_opentelemetry::layer().with_tracer(self.tracer.tracer("mcp-edge"))
    }

    /// The `metrics` recorder that exports mcp-edge's metrics.
    pub fn recorder(&self) -> MeterRecorder {
        use opentelemetry::metrics::MeterProvider as _;
        MeterRecorder {
            meter: self.meter.meter("mcp-edge"),
            described: Mutex::default(),
            handles: Mutex::default(),
        }
    }

    /// Sends what is still held and stops the export.
    pub fn shutdown(&self) {
        if let Err(error) = self.tracer.shutdown() {
            tracing::warn!(%error, "OTLP: the spans' export did not shut down cleanly");
        }
        if let Err(error) = self.meter.shutdown() {
            tracing::warn!(%error, "OTLP: the metrics' export did not shut down cleanly");
        }
    }

    /// Sends what is held now.
    pub fn flush(&self) {
        let _ = self.tracer.force_flush();
        let _ = self.meter.force_flush();
    }
}

/// The resource: `OTEL_SERVICE_NAME` and `OTEL_RESOURCE_ATTRIBUTES` as the
/// SDK reads them, the service named [`SERVICE`] when neither names it.
fn resource() -> Resource {
    let named = std::env::var("OTEL_SERVICE_NAME").is_ok_and(|name| !name.is_empty())
        || std::env::var("OTEL_RESOURCE_ATTRIBUTES").is_ok_and(|attributes| {
            attributes
                .split(',')
                .any(|pair| pair.trim().starts_with("service.name="))
        });
    match named {
        true => Resource::builder().build(),
        false => Resource::builder().with_service_name(SERVICE).build(),
    }
}

/// The bucket bounds the conventions advise for the operation histogram.
fn operation_buckets(instrument: &Instrument) -> Option<Stream> {
    if instrument.name() != "mcp.server.operation.duration" {
        return None;
    }
    Stream::builder()
        .with_aggregation(Aggregation::ExplicitBucketHistogram {
            boundaries: mcp_edge::OPERATION_SECONDS.to_vec(),
            record_min_max: true,
        })
        .build()
        .ok()
}

/// The `metrics` recorder over an OpenTelemetry meter: one instrument per
/// metric name, with the unit and help its description gave, and one
/// handle per name and labels, whose labels become the attributes.
pub struct MeterRecorder {
    meter: opentelemetry::metrics::Meter,
    described: Mutex<HashMap<String, (Option<Unit>, String)>>,
    handles: Mutex<HashMap<Key, Handle>>,
}

/// The handle of one name and labels, shared by every registration of it.
#[derive(Clone)]
enum Handle {
    Counter(Arc<Exported<opentelemetry::metrics::Counter<u64>>>),
    Gauge(Arc<Exported<opentelemetry::metrics::Gauge<f64>>>),
    Histogram(Arc<Exported<opentelemetry::metrics::Histogram<f64>>>),
}

/// An instrument, the attributes of one key, and (for a counter and a
/// gauge) the value so far, as bits of an `f64` for a gauge.
struct Exported<I> {
    instrument: I,
    attributes: Vec<KeyValue>,
    value: AtomicU64,
}

impl MeterRecorder {
    fn describe(&self, key: KeyName, unit: Option<Unit>, help: SharedString) {
        lock(&self.described).insert(key.as_str().to_owned(), (unit, help.into_owned()));
    }

    /// The handle of `key`, made by `make` from the instrument's name, unit
    /// and help on its first registration.
    fn handle(
        &self,
        key: &Key,
        make: impl FnOnce(String, Option<&'static str>, String, Vec<KeyValue>) -> Handle,
    ) -> Handle {
        let mut handles = lock(&self.handles);
        if let Some(handle) = handles.get(key) {
            return handle.clone();
        }
        let (unit, help) = lock(&self.described)
            .get(key.name())
            .map(|(unit, help)| (unit.map(|unit| unit.as_canonical_label()), help.clone()))
            .unwrap_or_default();
        let attributes = key
            .labels()
            .map(|label| KeyValue::new(label.key().to_owned(), label.value().to_owned()))
            .collect();
        let handle = make(key.name().to_owned(), unit, help, attributes);
        handles.insert(key.clone(), handle.clone());
        handle
    }
}

fn lock<T>(mutex: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    mutex
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner)
}

impl metrics::Recorder for MeterRecorder {
    fn describe_counter(&self, key: KeyName, unit: Option<Unit>, help: SharedString) {
        self.describe(key, unit, help);
    }

    fn describe_gauge(&self, key: KeyName, unit: Option<Unit>, help: SharedString) {
        self.describe(key, unit, help);
    }

    fn describe_histogram(&self, key: KeyName, unit: Option<Unit>, help: SharedString) {
        self.describe(key, unit, help);
    }

    fn register_counter(&self, key: &Key, _: &Metadata<'_>) -> metrics::Counter {
        let handle = self.handle(key, |name, unit, help, attributes| {
            let mut builder = self.meter.u64_counter(name).with_description(help);
            if let Some(unit) = unit {
                builder = builder.with_unit(unit);
            }
            Handle::Counter(Arc::new(Exported::new(builder.build(), attributes)))
        });
        match handle {
            Handle::Counter(counter) => metrics::Counter::from_arc(counter),
            _ => metrics::Counter::noop(),
        }
    }

    fn register_gauge(&self, key: &Key, _: &Metadata<'_>) -> metrics::Gauge {
        let handle = self.handle(key, |name, unit, help, attributes| {
            let mut builder = self.meter.f64_gauge(name).with_description(help);
            if let Some(unit) = unit {
                builder = builder.with_unit(unit);
            }
            Handle::Gauge(Arc::new(Exported::new(builder.build(), attributes)))
        });
        match handle {
            Handle::Gauge(gauge) => metrics::Gauge::from_arc(gauge),
            _ => metrics::Gauge::noop(),
        }
    }

    fn register_histogram(&self, key: &Key, _: &Metadata<'_>) -> metrics::Histogram {
        let handle = self.handle(key, |name, unit, help, attributes| {
            let mut builder = self.meter.f64_histogram(name).with_description(help);
            if let Some(unit) = unit {
                builder = builder.with_unit(unit);
            }
            Handle::Histogram(Arc::new(Exported::new(builder.build(), attributes)))
        });
        match handle {
            Handle::Histogram(histogram) => metrics::Histogram::from_arc(histogram),
            _ => metrics::Histogram::noop(),
        }
    }
}

impl<I> Exported<I> {
    fn new(instrument: I, attributes: Vec<KeyValue>) -> Self {
        Self {
            instrument,
            attributes,
            value: AtomicU64::new(0),
        }
    }
}

impl CounterFn for Exported<opentelemetry::metrics::Counter<u64>> {
    fn increment(&self, value: u64) {
        self.value.fetch_add(value, Ordering::Relaxed);
        self.instrument.add(value, &self.attributes);
    }

    fn absolute(&self, value: u64) {
        let before = self.value.fetch_max(value, Ordering::Relaxed);
        self.instrument
            .add(value.saturating_sub(before), &self.attributes);
    }
}

impl GaugeFn for Exported<opentelemetry::metrics::Gauge<f64>> {
    fn increment(&self, value: f64) {
        self.update(|now| now + value);
    }

    fn decrement(&self, value: f64) {
        self.update(|now| now - value);
    }

    fn set(&self, value: f64) {
        self.update(|_| value);
    }
}

impl Exported<opentelemetry::metrics::Gauge<f64>> {
    fn update(&self, change: impl Fn(f64) -> f64) {
        let mut now = self.value.load(Ordering::Relaxed);
        loop {
            let next = change(f64::from_bits(now));
            match self.value.compare_exchange_weak(
                now,
                next.to_bits(),
                Ordering::Relaxed,
                Ordering::Relaxed,
            ) {
                Ok(_) => return self.instrument.record(next, &self.attributes),
                Err(actual) => now = actual,
            }
        }
    }
}

impl HistogramFn for Exported<opentelemetry::metrics::Histogram<f64>> {
    fn record(&self, value: f64) {
        self.instrument.record(value, &self.attributes);
    }
}
