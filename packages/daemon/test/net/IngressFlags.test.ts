/**
 * The ingress's flags, as the server and dev roles parse them: defaults that only warn when their
 * address is taken, explicit addresses that must bind, `off`, and the timeouts.
 */
import { Either } from "effect"
import { describe, expect, it } from "vitest"
import * as Dev from "../../src/Dev.js"
import * as Server from "../../src/Server.js"

const ingressOf = (args: Array<string>) => {
  const r = Server.parseFlags(args, {})
  if (Either.isLeft(r)) throw new Error(r.left.message)
  return r.right.ingress
}
const error = (args: Array<string>) => {
  const r = Server.parseFlags(args, {})
  return Either.isLeft(r) ? r.left.message : undefined
}

describe("ingress flags", () => {
  it("default to 127.0.0.1:8080 and :8443, not explicit, 60 s and 5 s", () => {
    expect(ingressOf([])).toEqual({
      http: { host: "127.0.0.1", port: 8080, explicit: false },
      https: { host: "127.0.0.1", port: 8443, explicit: false },
      timeouts: { responseMs: 60_000, connectMs: 5000, idleMs: 60_000 }
    })
  })

  it("take explicit addresses, off, and durations", () => {
    expect(ingressOf(["--ingress-listen", "0.0.0.0:80", "--ingress-tls-listen", "off", "--ingress-timeout", "2m", "--ingress-connect-timeout", "250ms"])).toEqual({
      http: { host: "0.0.0.0", port: 80, explicit: true },
      https: undefined,
      timeouts: { responseMs: 120_000, connectMs: 250, idleMs: 120_000 }
    })
    expect(ingressOf(["--ingress-listen=:0"]).http).toEqual({ host: "0.0.0.0", port: 0, explicit: true })
  })

  it("reject what is not an address or a duration", () => {
    expect(error(["--ingress-listen", "nowhere"])).toBe('--ingress-listen "nowhere": expected HOST:PORT or off')
    expect(error(["--ingress-timeout", "soon"])).toContain("--ingress-timeout")
  })

  it("pass through koder-fleet dev", () => {
    const r = Dev.parseFlags(["--ingress-listen", "127.0.0.1:0", "--ingress-tls-listen", "off"], {})
    if (Either.isLeft(r)) throw new Error(r.left.message)
    expect(r.right.server.ingress.http).toEqual({ host: "127.0.0.1", port: 0, explicit: true })
    expect(r.right.server.ingress.https).toBeUndefined()
  })
})
