"""Record producers: markers, API spans, tasks, steps, host sampling."""
