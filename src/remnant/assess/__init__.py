"""The assessment: plan (cost before running), run (orchestrator, resumable) and the run manifest (R23-R25)."""
