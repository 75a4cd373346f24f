try { new Profiler({ sampleInterval: 10, maxBufferSize: 10 }); console.log('constructed'); }
catch (e) { console.log(e.name); }
