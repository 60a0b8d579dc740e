/**
 * A small Prometheus-style metric registry: counters, gauges and histograms with labels, kept in
 * plain objects so that recording on a hot path (every API request, every store write) costs a
 * map lookup and an addition. A labelled metric hands out bound children (`labels(...)`) that
 * callers may keep, so the lookup happens once. Gauges may also be computed at scrape time from
 * callbacks (`gauge.collect`), for values other code already keeps (queue depth, cache size).
 *
 *   instrumented code ─▶ Counter / Gauge / Histogram ─┐
 *   scrape-time callbacks (collect, register) ────────┴▶ snapshot(): Family[] ─▶ Exposition.render
 *
 * Core stays runtime-agnostic: no `node:*`, no client library. The registry is the `MetricRegistry`
 * service, a `Context.Reference` whose default is one process-wide registry, so instrumented code
 * records without anyone wiring it; a test or an embedding program provides its own.
 *
 * Asking twice for a metric of one name answers the same metric (every definition lives in
 * `FleetMetrics`, so two definitions of one name never disagree).
 */
import { Context } from "effect"

/** The kinds of metric. */
export type MetricType = "counter" | "gauge" | "histogram"

/** How a metric is declared. */
export interface MetricOptions {
  /** `snake_case`, with the unit as suffix (`_seconds`, `_bytes`, `_total` for counters). */
  readonly name: string
  readonly help: string
  /** Label names, in the order `labels(...)` takes their values. */
  readonly labelNames?: ReadonlyArray<string>
}

/** How a histogram is declared. */
export interface HistogramOptions extends MetricOptions {
  /** Upper bounds, ascending; `+Inf` is implied (default: `defaultBuckets`). */
  readonly buckets?: ReadonlyArray<number>
}

/** Prometheus client libraries' default buckets (seconds). */
export const defaultBuckets: ReadonlyArray<number> = [0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10]

/** One series of a counter. */
export interface CounterChild {
  /** Add `by` (default 1; negative amounts are ignored: a counter only goes up). */
  readonly inc: (by?: number) => void
  readonly value: () => number
}

/** One series of a gauge. */
export interface GaugeChild {
  readonly set: (value: number) => void
  readonly inc: (by?: number) => void
  readonly dec: (by?: number) => void
  readonly value: () => number
}

/** One series of a histogram. */
export interface HistogramChild {
  readonly observe: (value: number) => void
  /** Count, sum and per-bucket (non-cumulative) counts so far; the last bucket is `+Inf`. */
  readonly value: () => { readonly count: number; readonly sum: number; readonly buckets: ReadonlyArray<number> }
}

/** A counter; `inc` records on the series without labels. */
export interface Counter extends CounterChild {
  readonly name: string
  readonly labels: (...values: ReadonlyArray<string>) => CounterChild
}

/** Adds scrape-time values to a gauge: `add(labelValues, value)`; equal label sets add up. */
export type GaugeCallback = (add: (labelValues: ReadonlyArray<string>, value: number) => void) => void

/** A gauge; `set`/`inc`/`dec` act on the series without labels. */
export interface Gauge extends GaugeChild {
  readonly name: string
  readonly labels: (...values: ReadonlyArray<string>) => GaugeChild
  /** Compute series at every scrape; answers a function that removes the callback. */
  readonly collect: (callback: GaugeCallback) => () => void
}

/** A histogram; `observe` records on the series without labels. */
export interface Histogram extends HistogramChild {
  readonly name: string
  readonly bounds: ReadonlyArray<number>
  readonly labels: (...values: ReadonlyArray<string>) => HistogramChild
}

/** One series in a snapshot: label pairs and a value (counter, gauge) or a distribution. */
export interface Series {
  readonly labels: ReadonlyArray<readonly [string, string]>
  readonly value: number
}

/** One histogram series in a snapshot; `buckets` are cumulative and end with `+Inf`. */
export interface HistogramSeries {
  readonly labels: ReadonlyArray<readonly [string, string]>
  readonly buckets: ReadonlyArray<readonly [number, number]>
  readonly sum: number
  readonly count: number
}

/** A metric family as exposition renders it. */
export type Family =
  | { readonly type: "counter" | "gauge"; readonly name: string; readonly help: string; readonly series: ReadonlyArray<Series> }
  | { readonly type: "histogram"; readonly name: string; readonly help: string; readonly series: ReadonlyArray<HistogramSeries> }

/** A registry of metrics. */
export interface Registry {
  readonly counter: (options: MetricOptions) => Counter
  readonly gauge: (options: MetricOptions) => Gauge
  readonly histogram: (options: HistogramOptions) => Histogram
  /** Add families computed at every scrape (process metrics); answers a function that removes them. */
  readonly register: (collector: () => ReadonlyArray<Family>) => () => void
  /** Every family with at least one series, sorted by name. */
  readonly snapshot: () => ReadonlyArray<Family>
}

// Label values joined by a character that never appears in them in practice; the key is only
// for lookup, the values are kept as they are.
const sep = "\u0001"
const keyOf = (values: ReadonlyArray<string>) => (values.length === 0 ? "" : values.length === 1 ? values[0]! : values.join(sep))

interface Entry<C> {
  readonly values: ReadonlyArray<string>
  readonly child: C
}

/** Children by label values, created on first use. */
const children = <C>(make: () => C) => {
  const byKey = new Map<string, Entry<C>>()
  return {
    byKey,
    get: (values: ReadonlyArray<string>): C => {
      const key = keyOf(values)
      let e = byKey.get(key)
      if (e === undefined) {
        e = { values: [...values], child: make() }
        byKey.set(key, e)
      }
      return e.child
    }
  }
}

const pairs = (names: ReadonlyArray<string>, values: ReadonlyArray<string>): ReadonlyArray<readonly [string, string]> =>
  names.map((n, i) => [n, values[i] ?? ""] as const)

const makeCounterChild = (): CounterChild => {
  let v = 0
  return {
    inc: (by = 1) => {
      if (by > 0) v += by
    },
    value: () => v
  }
}

const makeGaugeChild = (): GaugeChild => {
  let v = 0
  return {
    set: (x) => {
      v = x
    },
    inc: (by = 1) => {
      v += by
    },
    dec: (by = 1) => {
      v -= by
    },
    value: () => v
  }
}

const makeHistogramChild = (bounds: ReadonlyArray<number>): HistogramChild => {
  const counts = new Array<number>(bounds.length + 1).fill(0)
  let sum = 0
  let count = 0
  const n = bounds.length
  return {
    observe: (x) => {
      let i = 0
      // Few buckets: a linear scan beats a binary search's branches.
      while (i < n && x > bounds[i]!) i++
      counts[i]!++
      sum += x
      count++
    },
    value: () => ({ count, sum, buckets: counts })
  }
}

/** A new, empty registry. */
export const make = (): Registry => {
  const metrics = new Map<string, { readonly type: MetricType; readonly metric: unknown; readonly family: () => Family | undefined }>()
  const collectors = new Set<() => ReadonlyArray<Family>>()

  const define = <M>(type: MetricType, name: string, build: () => { metric: M; family: () => Family | undefined }): M => {
    const existing = metrics.get(name)
    if (existing !== undefined && existing.type === type) return existing.metric as M
    const built = build()
    metrics.set(name, { type, metric: built.metric, family: built.family })
    return built.metric
  }

  const counter = (options: MetricOptions): Counter =>
    define("counter", options.name, () => {
      const names = options.labelNames ?? []
      const series = children(makeCounterChild)
      const plain = series.get([])
      const metric: Counter = { name: options.name, inc: plain.inc, value: plain.value, labels: (...values) => series.get(values) }
      if (names.length > 0) series.byKey.delete("")
      return {
        metric,
        family: () => ({
          type: "counter",
          name: options.name,
          help: options.help,
          series: [...series.byKey.values()].map((e) => ({ labels: pairs(names, e.values), value: e.child.value() }))
        })
      }
    })

  const gauge = (options: MetricOptions): Gauge =>
    define("gauge", options.name, () => {
      const names = options.labelNames ?? []
      const series = children(makeGaugeChild)
      const plain = series.get([])
      if (names.length > 0) series.byKey.delete("")
      const callbacks = new Set<GaugeCallback>()
      const metric: Gauge = {
        name: options.name,
        set: plain.set,
        inc: plain.inc,
        dec: plain.dec,
        value: plain.value,
        labels: (...values) => series.get(values),
        collect: (callback) => {
          callbacks.add(callback)
          return () => void callbacks.delete(callback)
        }
      }
      return {
        metric,
        family: () => {
          const out = new Map<string, { values: ReadonlyArray<string>; value: number }>()
          for (const e of series.byKey.values()) out.set(keyOf(e.values), { values: e.values, value: e.child.value() })
          // Callbacks' values add up per label set and replace a set value of the same labels.
          const computed = new Map<string, { values: ReadonlyArray<string>; value: number }>()
          const add = (values: ReadonlyArray<string>, value: number) => {
            const key = keyOf(values)
            const prev = computed.get(key)
            if (prev === undefined) computed.set(key, { values: [...values], value })
            else prev.value += value
          }
          for (const c of callbacks) c(add)
          for (const [key, e] of computed) out.set(key, e)
          return { type: "gauge", name: options.name, help: options.help, series: [...out.values()].map((e) => ({ labels: pairs(names, e.values), value: e.value })) }
        }
      }
    })

  const histogram = (options: HistogramOptions): Histogram =>
    define("histogram", options.name, () => {
      const names = options.labelNames ?? []
      const bounds = [...(options.buckets ?? defaultBuckets)].filter((b) => Number.isFinite(b)).sort((a, b) => a - b)
      const series = children(() => makeHistogramChild(bounds))
      const plain = series.get([])
      if (names.length > 0) series.byKey.delete("")
      const metric: Histogram = { name: options.name, bounds, observe: plain.observe, value: plain.value, labels: (...values) => series.get(values) }
      return {
        metric,
        family: () => ({
          type: "histogram",
          name: options.name,
          help: options.help,
          series: [...series.byKey.values()].map((e) => {
            const v = e.child.value()
            let running = 0
            const buckets = v.buckets.map((c, i) => {
              running += c
              return [i < bounds.length ? bounds[i]! : Number.POSITIVE_INFINITY, running] as const
            })
            return { labels: pairs(names, e.values), buckets, sum: v.sum, count: v.count }
          })
        })
      }
    })

  return {
    counter,
    gauge,
    histogram,
    register: (collector) => {
      collectors.add(collector)
      return () => void collectors.delete(collector)
    },
    snapshot: () => {
      const out: Array<Family> = []
      for (const m of metrics.values()) {
        const f = m.family()
        if (f !== undefined && f.series.length > 0) out.push(f)
      }
      for (const c of collectors) for (const f of c()) if (f.series.length > 0) out.push(f)
      return out.sort((a, b) => (a.name < b.name ? -1 : a.name > b.name ? 1 : 0))
    }
  }
}

/** The process-wide registry instrumented code records into unless given another. */
export const global: Registry = make()

/** The registry service; its default is `global`. */
export class MetricRegistry extends Context.Reference<MetricRegistry>()("@koder/fleet-core/MetricRegistry", {
  defaultValue: (): Registry => global
}) {}
