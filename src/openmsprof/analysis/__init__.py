"""analysis layer: before/after comparison of jobs (:mod:`openmsprof.analysis.compare`) and the
statistics behind its verdicts (:mod:`openmsprof.analysis.stats`)."""
