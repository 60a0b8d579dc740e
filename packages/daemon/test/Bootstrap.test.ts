/**
 * The bootstrap token's life: minted once, stored hashed, kept in the kubeconfig only.
 */
import { Authn } from "@koder/fleet-core"
import { Effect } from "effect"
import { readFileSync, rmSync, statSync, writeFileSync } from "node:fs"
import { mkdtemp, rm } from "node:fs/promises"
import { tmpdir } from "node:os"
import { join } from "node:path"
import { afterEach, beforeEach, describe, expect, it } from "vitest"
import * as Bootstrap from "../src/Bootstrap.js"
import * as Kubeconfig from "../src/Kubeconfig.js"

const cluster = { server: "https://127.0.0.1:9300", caPem: "CA" }

describe("Bootstrap", () => {
  let dir: string
  beforeEach(async () => {
    dir = await mkdtemp(join(tmpdir(), "fleet-bootstrap-"))
  })
  afterEach(async () => {
    await rm(dir, { recursive: true, force: true })
  })

  it("mints a 32-byte base64url token once, keeping only its hash beside the kubeconfig", async () => {
    const minted = await Effect.runPromise(Bootstrap.load(dir))
    if (minted._tag !== "Minted") throw new Error("expected a minted token")
    expect(Buffer.from(minted.token, "base64url").length).toBe(32)
    expect(minted.hash).toBe(await Effect.runPromise(Authn.hashToken(minted.token)))
    const published = await Effect.runPromise(Bootstrap.publish(dir, minted, cluster))
    expect(published.newToken).toBe(minted.token)
    const f = Bootstrap.files(dir)
    expect(readFileSync(f.hash, "utf8")).toBe(`${minted.hash}\n`)
    expect(Kubeconfig.tokenOf(readFileSync(f.kubeconfig, "utf8"))).toBe(minted.token)
    expect(statSync(f.hash).mode & 0o777).toBe(0o600)
    expect(statSync(f.kubeconfig).mode & 0o777).toBe(0o600)

    const stored = await Effect.runPromise(Bootstrap.load(dir))
    expect(stored).toEqual({ _tag: "Stored", hash: minted.hash })
    const before = readFileSync(f.kubeconfig, "utf8")
    const again = await Effect.runPromise(Bootstrap.publish(dir, stored, cluster))
    expect(again).toEqual({ kubeconfig: f.kubeconfig, newToken: undefined, warning: undefined })
    expect(readFileSync(f.kubeconfig, "utf8")).toBe(before)

    // A new port: the same token, pointed at the new address.
    await Effect.runPromise(Bootstrap.publish(dir, stored, { ...cluster, server: "https://127.0.0.1:9301" }))
    const moved = readFileSync(f.kubeconfig, "utf8")
    expect(Kubeconfig.clusterOf(moved)?.server).toBe("https://127.0.0.1:9301")
    expect(Kubeconfig.tokenOf(moved)).toBe(minted.token)
  })

  it("warns instead of rotating when the kubeconfig lost the token", async () => {
    const minted = await Effect.runPromise(Bootstrap.load(dir))
    await Effect.runPromise(Bootstrap.publish(dir, minted, cluster))
    rmSync(Bootstrap.files(dir).kubeconfig)
    const r = await Effect.runPromise(Bootstrap.publish(dir, await Effect.runPromise(Bootstrap.load(dir)), cluster))
    expect(r.newToken).toBeUndefined()
    expect(r.warning).toContain("no longer holds the bootstrap token")
  })

  it("refuses a hash file it cannot read", async () => {
    writeFileSync(Bootstrap.files(dir).hash, "garbage\n")
    const exit = await Effect.runPromiseExit(Bootstrap.load(dir))
    expect(exit._tag).toBe("Failure")
  })
})
