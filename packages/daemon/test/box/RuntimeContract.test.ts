/**
 * The Runtime contract (core's RuntimeContract) against the box: kbox-client → a real
 * `koder-fleet box` process with the process driver (isolated, as root), and the runc driver with
 * a real runc and a busybox image (root; like RuncDriver.test.ts it fails, never skips, when runc
 * or busybox is missing).
 */
import { Runtime } from "@koder/fleet-core"
import { RuntimeContract } from "@koder/fleet-core/testing"
import { KboxClient } from "@koder/fleet-kbox-client"
import { Effect, Layer } from "effect"
import { mkdtempSync, rmSync } from "node:fs"
import { tmpdir } from "node:os"
import { join } from "node:path"
import { afterAll, beforeAll, describe } from "vitest"
import * as RuncDriver from "../../src/box/RuncDriver.js"
import { type BoxProcess, startBox } from "./BoxProcess.js"
import { busyboxTarball, requireRunc } from "./RuncFixture.js"

describe("the process driver through kbox-client", () => {
  let dir: string
  let box: BoxProcess | undefined
  beforeAll(async () => {
    dir = mkdtempSync(join(tmpdir(), "kbox-contract-"))
    box = await startBox(["--data-dir", join(dir, "data"), "--socket", join(dir, "box.sock")])
  })
  afterAll(async () => {
    await box?.stop()
    rmSync(dir, { recursive: true, force: true })
  })
  RuntimeContract.suite("box process driver (kbox-client)", Layer.suspend(() => KboxClient.layer({ socketPath: box!.socketPath })))
})

describe("the runc driver", () => {
  let dir: string
  let handle: RuncDriver.Handle | undefined
  beforeAll(async () => {
    requireRunc()
    dir = mkdtempSync(join(tmpdir(), "kbox-runc-contract-"))
    handle = RuncDriver.open({ dataDir: join(dir, "data") })
    await Effect.runPromise(handle.runtime.images.import({ name: "busybox:contract", path: busyboxTarball(dir) }))
  })
  afterAll(() => {
    handle?.close()
    if (dir) rmSync(dir, { recursive: true, force: true })
  })
  RuntimeContract.suite("box runc driver", Layer.suspend(() => Layer.succeed(Runtime.Runtime, handle!.runtime)), {
    container: { image: "busybox:contract" }
  })
})
