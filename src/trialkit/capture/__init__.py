"""Model calls that agents make with their own SDK clients, captured at the HTTP client.

`wire` knows the model APIs' wire formats (which requests are model calls, what their answers
say); `hook` wraps `httpx` and `httpx2` clients so those calls land in the trial's transcript
and go through the run's cassette.
"""
