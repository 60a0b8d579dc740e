/**
 * The per-container probe state machine of the kubelet's prober workers, as pure functions. Each
 * probe (liveness, readiness, startup) of a running container has a worker that fires
 * `initialDelaySeconds` after the container started and every `periodSeconds` after that; a
 * result becomes the probe's verdict once it repeated `successThreshold` (successes) or
 * `failureThreshold` (failures) times in a row. Verdicts start as liveness success, readiness
 * failure, startup unknown. Until the startup probe succeeds, liveness and readiness are not run
 * (and the container is neither started nor ready); after it succeeds it is not run again. A
 * liveness or startup failure puts its worker on hold: the container is killed, and its next
 * attempt (a new container id) gets fresh workers.
 *
 * Running the probes (exec through the Runtime, HTTP and TCP through the `Prober` port) and the
 * timers are the agent's; this module only says what is due and what the results mean.
 */
import type * as Pod from "../model/Pod.js"

/** The three kinds of probe. */
export type Kind = "liveness" | "readiness" | "startup"

/** A probe's verdict. */
export type Result = "success" | "failure" | "unknown"

/** A probe's timing and thresholds with the Kubernetes defaults applied. */
export interface Settings {
  readonly initialDelayMs: number
  readonly periodMs: number
  readonly timeoutMs: number
  readonly successThreshold: number
  readonly failureThreshold: number
}

/** The Kubernetes defaults: period 10 s, timeout 1 s, thresholds 1 and 3. */
export const settings = (probe: Pod.Probe): Settings => ({
  initialDelayMs: (probe.initialDelaySeconds ?? 0) * 1000,
  periodMs: Math.max(1, probe.periodSeconds ?? 10) * 1000,
  timeoutMs: Math.max(1, probe.timeoutSeconds ?? 1) * 1000,
  successThreshold: Math.max(1, probe.successThreshold ?? 1),
  failureThreshold: Math.max(1, probe.failureThreshold ?? 3)
})

/** One probe's worker state. */
export interface Worker {
  readonly kind: Kind
  readonly probe: Pod.Probe
  readonly settings: Settings
  /** The verdict. */
  readonly result: Result
  /** The last raw outcome and how many times in a row it came. */
  readonly last: Result
  readonly run: number
  /** Stopped after a liveness/startup failure (the container is to be restarted). */
  readonly onHold: boolean
  /** When the worker next fires. */
  readonly nextAtMs: number
}

/** The probe workers of one running container. */
export interface ContainerProbes {
  readonly containerId: string
  readonly workers: ReadonlyArray<Worker>
}

/** What the probes say about a container. */
export interface Verdict {
  /** The startup probe succeeded, or there is none. */
  readonly started: boolean
  /** Started and the readiness probe succeeds, or there is none. */
  readonly ready: boolean
  readonly livenessFailed: boolean
  readonly startupFailed: boolean
}

const initialResult: Record<Kind, Result> = { liveness: "success", readiness: "failure", startup: "unknown" }

/** Workers for a container started at `startedAtMs`. */
export const start = (containerId: string, container: Pod.Container, startedAtMs: number): ContainerProbes => {
  const workers: Array<Worker> = []
  const add = (kind: Kind, probe: Pod.Probe | undefined) => {
    if (probe === undefined) return
    const s = settings(probe)
    workers.push({ kind, probe, settings: s, result: initialResult[kind], last: "unknown", run: 0, onHold: false, nextAtMs: startedAtMs + s.initialDelayMs })
  }
  add("startup", container.startupProbe)
  add("liveness", container.livenessProbe)
  add("readiness", container.readinessProbe)
  return { containerId, workers }
}

const startedOf = (probes: ContainerProbes): boolean => {
  const startup = probes.workers.find((w) => w.kind === "startup")
  return startup === undefined || startup.result === "success"
}

// Whether a worker probes at all right now (ignoring time).
const active = (probes: ContainerProbes, w: Worker): boolean => {
  if (w.onHold) return false
  const started = startedOf(probes)
  return w.kind === "startup" ? !started : started
}

/** The probes due at `nowMs`. */
export const due = (probes: ContainerProbes, nowMs: number): ReadonlyArray<Kind> =>
  probes.workers.filter((w) => active(probes, w) && w.nextAtMs <= nowMs).map((w) => w.kind)

/** When the next probe is due (undefined: none will be). */
export const nextDueMs = (probes: ContainerProbes): number | undefined => {
  let next: number | undefined
  for (const w of probes.workers) if (active(probes, w) && (next === undefined || w.nextAtMs < next)) next = w.nextAtMs
  return next
}

/** The state after probe `kind` answered `outcome` at `nowMs` (the kubelet worker's doProbe). */
export const record = (probes: ContainerProbes, kind: Kind, outcome: "success" | "failure", nowMs: number): ContainerProbes => {
  const wasStarted = startedOf(probes)
  const workers = probes.workers.map((w): Worker => {
    if (w.kind !== kind) return w
    const run = w.last === outcome ? w.run + 1 : 1
    const nextAtMs = nowMs + w.settings.periodMs
    const threshold = outcome === "failure" ? w.settings.failureThreshold : w.settings.successThreshold
    if (run < threshold) return { ...w, last: outcome, run, nextAtMs }
    const hold = (kind === "liveness" || kind === "startup") && outcome === "failure"
    return { ...w, result: outcome, last: outcome, run: hold ? 0 : run, onHold: hold, nextAtMs }
  })
  const next = { containerId: probes.containerId, workers }
  // Liveness and readiness start counting once the container has started.
  if (!wasStarted && startedOf(next)) {
    return { ...next, workers: workers.map((w) => (w.kind === "startup" ? w : { ...w, nextAtMs: Math.max(w.nextAtMs, nowMs) })) }
  }
  return next
}

/** The verdict of a container's probes (`undefined`: a container without probe workers). */
export const verdict = (probes: ContainerProbes | undefined): Verdict => {
  if (probes === undefined) return { started: true, ready: true, livenessFailed: false, startupFailed: false }
  const of = (kind: Kind) => probes.workers.find((w) => w.kind === kind)
  const started = startedOf(probes)
  const readiness = of("readiness")
  return {
    started,
    ready: started && (readiness === undefined || readiness.result === "success"),
    livenessFailed: of("liveness")?.result === "failure",
    startupFailed: of("startup")?.result === "failure"
  }
}

/** Whether two verdicts differ (a change the pod's sync must see). */
export const changed = (a: Verdict, b: Verdict): boolean =>
  a.started !== b.started || a.ready !== b.ready || a.livenessFailed !== b.livenessFailed || a.startupFailed !== b.startupFailed
