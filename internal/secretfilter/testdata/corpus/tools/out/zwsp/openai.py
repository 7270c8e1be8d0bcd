from open​ai impo​rt Open​AI

clie​nt = Open​AI(a​pi_k​ey="​sk-p​roj-​DgD5​Rr_v​ZVyl​wB5f​8Fgm​Wrzj​-bAT​GP5X​yfjw​TVjV​juUT​bBah​F_c0​xrco​eZRE​5lyO​pru-​gCad​fJT3​Blbk​FJig​00pp​BOnK​BZKe​VxfW​id7_​cVBR​J55v​YpRk​N74J​1DiQ​bzMD​3-eF​m7D4​Cu7W​Doli​jd5c​gcr-​a10G​")
prin​t(cl​ient​.mod​els.​list​())
