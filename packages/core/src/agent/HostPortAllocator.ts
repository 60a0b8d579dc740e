/**
 * The HostPortAllocator port: finds free host ports for the host-network mode (`HostPorts`). The
 * agent passes the ports its pods already hold, so one is never handed out twice even while its
 * process is not listening (between restarts). The daemon provides it by binding port 0 on the
 * host; `makeMemory` counts up from a base for the agent's unit tests.
 */
import { Context, Effect, Layer } from "effect"
import { HostPortError } from "./AgentError.js"

/** The HostPortAllocator service. */
export interface HostPortAllocatorService {
  /** One free port per protocol in `protocols`, none of them in `exclude`. */
  readonly allocate: (protocols: ReadonlyArray<"TCP" | "UDP" | "SCTP">, exclude: ReadonlySet<number>) => Effect.Effect<ReadonlyArray<number>, HostPortError>
}

/** The HostPortAllocator port. */
export class HostPortAllocator extends Context.Tag("@koder/fleet-core/HostPortAllocator")<HostPortAllocator, HostPortAllocatorService>() {}

/** Ports counted up from `base` (default 30000), skipping excluded ones, up to 65535. */
export const makeMemory = (base = 30_000): HostPortAllocatorService => {
  let next = base
  return {
    allocate: (protocols, exclude) =>
      Effect.suspend(() => {
        const out: Array<number> = []
        for (let i = 0; i < protocols.length; i++) {
          while (next <= 65_535 && (exclude.has(next) || out.includes(next))) next++
          if (next > 65_535) return Effect.fail(new HostPortError({ message: "no free host port left" }))
          out.push(next++)
        }
        return Effect.succeed(out)
      })
  }
}

/** The memory allocator as a layer. */
export const layerMemory = (base?: number): Layer.Layer<HostPortAllocator> => Layer.succeed(HostPortAllocator, makeMemory(base))
