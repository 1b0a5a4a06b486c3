import json, sys, torch, time
torch.set_num_threads(1)
sys.path.insert(0,'src'); sys.path.insert(0,'scripts')
from train_coherence import split_sentences, DEFAULT_DATA
from vistkit.models.coherence_head import SentenceEncoder, N_PIECES
D='../shared/data/dhm-visual-storytelling/data'
texts=[]
for ds in ['vwp','vist']:
    for s in ['gt_test','llava_vc_p3']:
        texts += list(json.load(open(f'{D}/stories/{ds}/{s}.json')).values())
val=json.load(open(DEFAULT_DATA)); texts += [t for a in val.values() for t in a]
sents=sorted({x for t in texts for x in split_sentences(t)})
print(len(sents),flush=True); t=time.time()
enc=SentenceEncoder('minilm-l6',device='cpu',batch_size=64)
emb=torch.from_numpy(enc.encode(sents)); pieces=torch.from_numpy(enc.first_pieces(sents,N_PIECES))
torch.save({'sentences':sents,'emb':emb,'pieces':pieces},'emb_all.pt'); print('done',time.time()-t)
