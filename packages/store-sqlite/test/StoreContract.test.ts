// The shared Store contract, run against SQLite (durable settings) with a fresh file per test.
import { StoreContract } from "@koder/fleet-core/testing"
import { freshLayer } from "./storeFiles.js"

StoreContract.suite("sqlite", freshLayer())
