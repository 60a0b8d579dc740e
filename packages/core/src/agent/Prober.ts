/**
 * The Prober port: runs the network probes of the agent (HTTP GET: success on a 2xx or 3xx
 * answer; TCP: success when a connection opens), each within a timeout. Exec probes go through the
 * Runtime port instead. The daemon provides it over node:http/net; `makeMemory` answers from a
 * table the test sets, for the agent's unit tests.
 */
import { Context, Effect, Layer } from "effect"

/** What to probe. */
export type Target =
  | {
      readonly _tag: "HttpGet"
      readonly scheme: "HTTP" | "HTTPS"
      readonly host: string
      readonly port: number
      readonly path: string
      readonly headers: ReadonlyArray<{ readonly name: string; readonly value: string }>
    }
  | { readonly _tag: "TcpSocket"; readonly host: string; readonly port: number }

/** A probe's outcome and, for events, why. */
export interface Outcome {
  readonly result: "success" | "failure"
  readonly message: string
}

/** The Prober service. */
export interface ProberService {
  /** Probe `target`, failing it after `timeoutMs`; never fails as an effect. */
  readonly probe: (target: Target, timeoutMs: number) => Effect.Effect<Outcome>
}

/** The Prober port. */
export class Prober extends Context.Tag("@koder/fleet-core/Prober")<Prober, ProberService>() {}

/** A memory prober and its table: `set(port, outcome)` decides what probes of that port answer. */
export interface MemoryProber {
  readonly service: ProberService
  readonly set: (port: number, outcome: Outcome["result"]) => void
  /** Targets probed so far. */
  readonly probed: () => ReadonlyArray<Target>
}

/** A prober answering from a table by port (default: failure, "connection refused"). */
export const makeMemory = (): MemoryProber => {
  const table = new Map<number, Outcome["result"]>()
  const seen: Array<Target> = []
  return {
    service: {
      probe: (target) =>
        Effect.sync(() => {
          seen.push(target)
          const result = table.get(target.port) ?? "failure"
          return { result, message: result === "success" ? "" : `dial tcp ${target.host}:${target.port}: connect: connection refused` }
        })
    },
    set: (port, outcome) => void table.set(port, outcome),
    probed: () => seen.slice()
  }
}

/** The memory prober as a layer (every probe fails unless the table says otherwise). */
export const layerMemory = (prober: MemoryProber = makeMemory()): Layer.Layer<Prober> => Layer.succeed(Prober, prober.service)
