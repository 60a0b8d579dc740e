/**
 * The DNS server as the server, dev and agent roles run it: `--dns-listen ADDR:PORT` (or `off`)
 * and `--dns-upstream ADDR[:PORT]` parsed, the server started over a `ServiceCatalog`, and the
 * shared listener rule applied — an address given explicitly must bind or startup fails; the
 * default one (`127.0.0.1:5353`) may be taken by another local cluster, which is reported and
 * skipped.
 */
import { type Client, type DnsRecords, ServiceCatalog } from "@koder/fleet-core"
import { Effect, Either, type Scope } from "effect"
import * as DnsServer from "./DnsServer.js"

/** A listener address, and whether the operator gave it (it must bind) or it is the default. */
export interface Listen {
  readonly host: string
  readonly port: number
  readonly explicit: boolean
}

/** The default DNS address of the server and dev roles. */
export const defaultListen = "127.0.0.1:5353"

/** `HOST:PORT`, `[V6]:PORT`, or `HOST` (port `fallbackPort`). */
export const parseAddress = (text: string, fallbackPort: number): Either.Either<DnsServer.Address, string> => {
  const m = /^(?:\[([^\]]+)\]|([^:[\]]+))(?::(\d+))?$/.exec(text.trim())
  const port = m?.[3] === undefined ? fallbackPort : Number(m[3])
  if (m === null || !Number.isInteger(port) || port < 0 || port > 65535) return Either.left(`${JSON.stringify(text)}: expected HOST:PORT`)
  return Either.right({ host: m[1] ?? m[2]!, port })
}

/** `--dns-listen`: `off` (undefined), or an address; `given` false marks the default. */
export const parseListen = (text: string | undefined, fallback: string | undefined): Either.Either<Listen | undefined, string> => {
  const value = text ?? fallback
  if (value === undefined || value === "off") return Either.right(undefined)
  return Either.map(
    Either.mapLeft(parseAddress(value, 5353), (why) => `--dns-listen ${why}`),
    (a) => ({ ...a, explicit: text !== undefined })
  )
}

/** `--dns-upstream`: an address, port 53 by default. */
export const parseUpstream = (text: string | undefined): Either.Either<DnsServer.Address | undefined, string> =>
  text === undefined || text === "" ? Either.right(undefined) : Either.mapLeft(parseAddress(text, 53), (why) => `--dns-upstream ${why}`)

/** The address to give clients of a server bound to `bound`: `fallback` for a wildcard bind. */
export const advertised = (bound: string, fallback: string): string => (bound === "0.0.0.0" || bound === "::" ? fallback : bound)

/** A view that answers nothing until `set` gives it a catalog (an agent binds before it has a client). */
export const deferredView = (): { readonly view: DnsRecords.View; readonly set: (view: DnsRecords.View) => void } => {
  let target: DnsRecords.View | undefined
  return {
    view: {
      service: (ns, name) => target?.service(ns, name),
      slices: (ns, name) => target?.slices(ns, name) ?? [],
      hasNamespace: (ns) => target?.hasNamespace(ns) ?? false
    },
    set: (view) => (target = view)
  }
}

/**
 * Start DNS on `listen` over `view`: the bound address, or undefined when the default address
 * was taken (logged). An explicit address that cannot be bound fails.
 */
export const serveView = (
  listen: Listen,
  view: DnsRecords.View,
  options: { readonly upstream?: DnsServer.Address | undefined; readonly role: string; readonly log?: (line: string) => void }
): Effect.Effect<DnsServer.Address | undefined, Error, Scope.Scope> => {
  const log = options.log ?? ((line: string) => console.error(line))
  return DnsServer.make({ listen, view, ...(options.upstream === undefined ? {} : { upstream: options.upstream }) }).pipe(
    Effect.map((s) => s.address),
    Effect.catchAll((e) => {
      const where = `${listen.host}:${listen.port}`
      if (listen.explicit) return Effect.fail(new Error(`cannot serve DNS on ${where}: ${e.message}`))
      log(`koder-fleet ${options.role}: warning: DNS not served: the default address ${where} is not available (${e.message}); give --dns-listen ADDR:PORT or off`)
      return Effect.succeed(undefined)
    })
  )
}

/** Start DNS over a new catalog on `client` (the server's in-process client). */
export const serve = (
  client: Client.Client,
  listen: Listen,
  options: { readonly upstream?: DnsServer.Address | undefined; readonly role: string; readonly log?: (line: string) => void }
): Effect.Effect<DnsServer.Address | undefined, Error, Scope.Scope> =>
  Effect.flatMap(ServiceCatalog.make(client), (catalog) => serveView(listen, catalog, options))
